"""`switchyard release ...` and `switchyard cost report`."""

import json
import sys

import click

from switchyard_cli.common import (
    API,
    MODEL_VERSION,
    api_command,
    client,
    create,
    emit,
    fail_on_pause_option,
    finish,
    int_list,
    output_option,
    wait_options,
)
from switchyard_cli.outcome import EXIT_OK
from switchyard_cli.waits import describe


@click.group()
def release() -> None:
    """Progressive releases (canary, blue/green)."""


def json_object(value: str | None) -> dict | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object")
    return parsed


@release.command("start")
@click.argument("target", type=MODEL_VERSION)
@click.option("--cluster", required=True)
@click.option("--strategy", type=click.Choice(["canary", "blue_green"]), default="canary")
@click.option("--steps", default="5,25,50,100", show_default=True, help="Candidate weights, %.")
@click.option(
    "--interval",
    type=float,
    default=None,
    help="Seconds between steps, and of each analysis interval unless --analysis sets "
    "interval_s (default 30).",
)
@click.option("--manual-gates", default=None, help="Steps that wait for approval, e.g. 50.")
@click.option("--analysis", default=None, help="JSON, e.g. '{\"min_requests\": 50}'.")
@click.option(
    "--confirm-unrouted",
    is_flag=True,
    help="Start even when more of the model's traffic than analysis.max_unrouted_share "
    "bypasses the router's HTTP split (gRPC, direct node calls): it is not protected.",
)
@wait_options
@fail_on_pause_option
@output_option
@api_command
def release_start(
    target, cluster, strategy, steps, interval, manual_gates, analysis, confirm_unrouted, **opts
):
    """Start releasing MODEL:VERSION on CLUSTER; --wait exits 0 promoted, 1 rolled back or
    failed (printing why), 4 when it waits for a person (paused, a manual gate)."""
    api, (name, number) = client(), target
    body = {"cluster": cluster, "model": name, "candidate_version": number}
    body.update(strategy=strategy, steps=int_list(steps))
    if confirm_unrouted:
        body["confirm_unrouted"] = True
    extras = {
        "step_interval_s": interval,
        "manual_gates": int_list(manual_gates) if manual_gates else None,
        "analysis": json_object(analysis),
    }
    body.update({key: value for key, value in extras.items() if value is not None})
    created = create(api, f"{API}/releases/", body)
    for text in created.get("warnings") or []:
        click.echo(f"switchyard: warning: {text}", err=True)
    finish(api, "release", f"{API}/releases/{created['id']}/", created, opts)


@release.command("status")
@click.argument("release_id", type=int)
@wait_options
@fail_on_pause_option
@output_option
@api_command
def release_status(release_id, **opts):
    """Show a release; --wait until it finished (exit 0 promoted, 1 rolled back or failed,
    4 when it waits for a person)."""
    api = client()
    path = f"{API}/releases/{release_id}/"
    finish(api, "release", path, api.request("GET", path), opts)


def _action_command(action: str):
    @release.command(action, help=f"{action.capitalize()} release ID (409: not in this state).")
    @click.argument("release_id", type=int)
    @output_option
    @api_command
    def command(release_id, output):
        answer = client().request(
            "POST", f"{API}/releases/{release_id}/actions/", body={"action": action}
        )
        emit(output, answer, f"release {release_id}: {describe('release', answer)}")
        sys.exit(EXIT_OK)

    return command


for _action in ("approve", "pause", "resume", "rollback", "promote"):
    _action_command(_action)


@click.group()
def cost() -> None:
    """Cost reports."""


# What a node's time was for (the cost API's `kind`); each row has a `<kind>_cost`.
COST_KINDS = ("serving", "validation", "benchmark")


@cost.command("report")
@click.option(
    "--group-by",
    type=click.Choice(["model", "version", "team", "cluster", "node"]),
    default="model",
    show_default=True,
)
@click.option("--from", "since", default=None, help="Start (ISO date or time).")
@click.option("--to", "until", default=None, help="End (ISO date or time).")
@click.option(
    "--kind",
    type=click.Choice(list(COST_KINDS)),
    default=None,
    help="Only this cost kind (smoke tests are validation).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "csv"]), default="table")
@output_option
@api_command
def cost_report(group_by, since, until, kind, fmt, output):
    """Costs grouped by team, model, ...: a table, CSV (--format csv) or JSON (-o json)."""
    query = {"group_by": group_by, "from": since, "to": until, "kind": kind}
    api = client()
    if fmt == "csv" and output != "json":
        query["format"] = "csv"
        click.echo(
            api.request("GET", f"{API}/reports/cost/", query=query, headers={"Accept": "text/csv"}),
            nl=False,
        )
        return
    report = api.request("GET", f"{API}/reports/cost/", query=query)
    total = f"total {report.get('total_cost')} {report.get('currency', '')}"
    lines = [f"{report.get('from')} .. {report.get('to')}  {total}"]
    for row in report.get("rows", []):
        keys = [str(v) for k, v in row.items() if k not in _NUMBERS]
        kinds = ", ".join(f"{k} {row[f'{k}_cost']}" for k in COST_KINDS if row.get(f"{k}_cost"))
        line = f"  {' / '.join(keys)}: {row.get('cost')} ({row.get('share')})"
        lines.append(f"{line} [{kinds}]" if kinds else line)
    emit(output, report, "\n".join(lines))


_NUMBERS = {
    "cost",
    "share",
    "requests",
    "successes",
    "compute_hours",
    "cost_per_1k",
    "change_pct",
    "idle_cost",
    "unknown_cost",
    "shared_idle",
    *(f"{kind}_cost" for kind in COST_KINDS),
}

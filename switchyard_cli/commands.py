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
    "--shadow",
    "shadow_s",
    type=float,
    default=None,
    help="Seconds of shadow before the first step: live requests copied to the candidate, "
    "its answers thrown away and judged.",
)
@click.option("--shadow-share", type=float, default=None, help="Percent copied (default 100).")
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
    target,
    cluster,
    strategy,
    steps,
    interval,
    manual_gates,
    analysis,
    shadow_s,
    shadow_share,
    confirm_unrouted,
    **opts,
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
        "shadow_s": shadow_s,
        "shadow_share": shadow_share,
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


@click.group()
def plan() -> None:
    """Release plans: one version through waves of clusters (docs/RELEASE_PLANS.md)."""


def _waves(wave, plan_file, bake, approve_waves, release_settings) -> list[dict]:
    if plan_file is not None:
        try:
            waves = json.load(plan_file)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--plan-file") from exc
        if not isinstance(waves, list):
            raise click.BadParameter("a JSON list of waves", param_hint="--plan-file")
        return waves
    if not wave:
        raise click.UsageError("give the waves: --wave CLUSTERS (again for each) or --plan-file")
    gated = set(int_list(approve_waves)) if approve_waves else set()
    return [
        {
            "clusters": [c.strip() for c in clusters.split(",") if c.strip()],
            "release": release_settings,
            "bake_s": bake,
            "approval": i + 1 in gated,
        }
        for i, clusters in enumerate(wave)
    ]


@plan.command("start")
@click.argument("target", type=MODEL_VERSION)
@click.option("--wave", multiple=True, help="Clusters of a wave, comma-separated; in order.")
@click.option(
    "--plan-file",
    type=click.File("r"),
    default=None,
    help="The waves as JSON ([{clusters, release, bake_s, approval}]) instead.",
)
@click.option(
    "--bake",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds a wave's releases must have succeeded before the next wave.",
)
@click.option(
    "--approve-waves",
    default=None,
    help="Waves (1-based) that wait for another release manager's approval, e.g. 2,3.",
)
@click.option("--steps", default=None, help="Each release's candidate weights, %.")
@click.option("--interval", type=float, default=None, help="Seconds between a release's steps.")
@click.option("--analysis", default=None, help="Each release's analysis, JSON.")
@click.option("--on-failure", type=click.Choice(["halt", "rollback"]), default="halt",
              show_default=True, help="What a rollback in any wave does to the plan.")  # fmt: skip
@wait_options
@output_option
@api_command
def plan_start(target, wave, plan_file, bake, approve_waves, steps, interval, analysis, on_failure,
               **opts):  # fmt: skip
    """Walk MODEL:VERSION through the waves; --wait exits 0 when every wave succeeded, 1 when
    the plan rolled back, 4 when it waits for a person (an approval, a resume)."""
    api, (name, number) = client(), target
    settings = {
        "steps": int_list(steps) if steps else None,
        "step_interval_s": interval,
        "analysis": json_object(analysis),
    }
    settings = {key: value for key, value in settings.items() if value is not None}
    body = {"model": name, "candidate_version": number, "on_failure": on_failure,
            "waves": _waves(wave, plan_file, bake, approve_waves, settings)}  # fmt: skip
    created = create(api, f"{API}/release-plans/", body)
    finish(api, "plan", f"{API}/release-plans/{created['id']}/", created, opts)


@plan.command("status")
@click.argument("plan_id", type=int)
@wait_options
@output_option
@api_command
def plan_status(plan_id, **opts):
    """Show a plan, wave by wave; --wait until it ended (0 succeeded, 1 rolled back or
    cancelled by a refusal) or waits for a person (4)."""
    api = client()
    path = f"{API}/release-plans/{plan_id}/"
    answer = api.request("GET", path)
    if not opts["wait"]:
        emit(opts["output"], answer, plan_lines(answer))
        sys.exit(EXIT_OK)
    finish(api, "plan", path, answer, opts)


def plan_lines(answer: dict) -> str:
    """A plan as text: its state, then one line per wave with each cluster's release."""
    lines = [f"plan {answer.get('id')}: {describe('plan', answer)}"]
    if answer.get("waiting_for"):
        lines[0] += f": waits for {answer['waiting_for']}"
    for wave in answer.get("waves") or []:
        cells = []
        for cell in wave.get("clusters") or []:
            if cell.get("release"):
                cells.append(f"{cell['cluster']} release {cell['release']} {cell.get('phase')}")
            elif cell.get("error"):
                cells.append(f"{cell['cluster']} not started: {cell['error']}")
            else:
                cells.append(f"{cell['cluster']} -")
        gate = " (approval)" if wave.get("approval") else ""
        lines.append(f"  wave {wave.get('index', 0) + 1}{gate}: " + "; ".join(cells))
    return "\n".join(lines)


def _plan_action_command(action: str, help_text: str):
    @plan.command(action, help=help_text)
    @click.argument("plan_id", type=int)
    @click.option("--comment", default="", help="Why (kept with the decision, audited).")
    @output_option
    @api_command
    def command(plan_id, comment, output):
        answer = client().request(
            "POST", f"{API}/release-plans/{plan_id}/actions/",
            body={"action": action, "comment": comment},
        )  # fmt: skip
        emit(output, answer, plan_lines(answer))
        sys.exit(EXIT_OK)

    return command


for _action, _help in (
    ("approve", "Approve the wave PLAN_ID waits for (not its author: 403)."),
    ("refuse", "Refuse the wave PLAN_ID waits for: the plan ends (not its author: 403)."),
    ("halt", "Pause every running release of PLAN_ID; nothing more starts."),
    ("resume", "Let a halted PLAN_ID go on."),
    ("rollback", "Roll back every release of PLAN_ID that has not ended."),
):
    _plan_action_command(_action, _help)

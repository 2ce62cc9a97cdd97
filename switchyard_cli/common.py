"""What every command shares: options, MODEL:VERSION, API errors to exit 2, waits."""

import functools
import json
import os
import sys
import uuid

import click

from switchyard_cli.client import ApiError, Client, settings
from switchyard_cli.outcome import EXIT_NEEDS_PERSON, EXIT_OK, EXIT_USAGE, exit_code, waiting_for
from switchyard_cli.output import emit, spinner
from switchyard_cli.waits import describe, wait_until_finished

API = "/api/v1"


class ModelVersion(click.ParamType):
    """MODEL:VERSION, e.g. risk_score:3."""

    name = "MODEL:VERSION"

    def convert(self, value, param, ctx):
        model, sep, version = str(value).rpartition(":")
        if not sep or not model or not version.isdigit():
            self.fail(f"{value!r} is not MODEL:VERSION (e.g. risk_score:3)", param, ctx)
        return model, int(version)


MODEL_VERSION = ModelVersion()


def int_list(value: str) -> list[int]:
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers") from exc


def output_option(fn):
    return click.option(
        "--output",
        "-o",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="json: one JSON document on stdout.",
    )(fn)


def wait_options(fn):
    fn = click.option(
        "--timeout", type=float, default=900.0, show_default=True, help="Seconds to wait."
    )(fn)
    return click.option("--wait", is_flag=True, help="Wait until it finishes.")(fn)


def fail_on_pause_option(fn):
    return click.option(
        "--fail-on-pause",
        is_flag=True,
        help="With --wait: when the release pauses or waits for an approval, ask for its "
        "rollback and exit 1 once it is rolled back, instead of exiting 4.",
    )(fn)


def api_command(fn):
    """Turn API errors into a message on stderr (and JSON on stdout) and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ApiError as exc:
            if kwargs.get("output") == "json":
                errors = exc.payload if isinstance(exc.payload, dict) else {"detail": str(exc)}
                click.echo(json.dumps({"http_status": exc.status, **errors}, default=str))
            click.echo(f"switchyard: {exc}", err=True)
            sys.exit(EXIT_USAGE)

    return wrapper


def use_token_from(name: str) -> None:
    """--token-env NAME: this run's token is NAME's value (SWITCHYARD_TOKEN's place)."""
    value = os.environ.get(name)
    if not value:
        raise click.UsageError(f"--token-env {name}: the environment variable {name} is not set")
    os.environ["SWITCHYARD_TOKEN"] = value


def client() -> Client:
    url, token = settings()
    if not token:
        raise ApiError(0, None, "no token: set SWITCHYARD_TOKEN or run `switchyard login`")
    return Client(url, token)


# The command that lets a waiting resource go on, by its state.
CONTINUE = {
    ("release", "waiting_approval"): "switchyard release approve {id}",
    ("release", "paused"): "switchyard release resume {id}",
    (
        "plan",
        "waiting_approval",
    ): "switchyard plan approve {id}  (a release manager other than its author)",
    ("plan", "halted"): "switchyard plan resume {id}  (or: switchyard plan rollback {id})",
}


def finish(api: Client, kind: str, path: str, payload: dict, opts: dict) -> None:
    """Print the created resource, or wait for its outcome and exit with its code: 0
    succeeded, 1 failed or rolled back (its `outcome_reason` printed), 3 timed out, 4 it
    waits for a person (what for, and the command that continues, printed)."""
    if not opts["wait"]:
        emit(opts["output"], payload, f"{kind} {payload.get('id', '')}: {describe(kind, payload)}")
        sys.exit(EXIT_OK)
    with spinner(f"{kind} {path.rstrip('/').rsplit('/', 1)[-1]}") as show:
        final, outcome = wait_until_finished(
            api, kind, path, opts["timeout"], lambda p: show(describe(kind, p))
        )
    waits = waiting_for(final) if outcome is None else None
    if waits and opts.get("fail_on_pause") and kind == "release":
        final, outcome = _roll_back(api, path, final, waits, opts)
        waits = None
    if waits:
        text = f"{kind}: {describe(kind, final)}: waits for {waits}"
        hint = CONTINUE.get((kind, str(final.get("state"))))
        if hint:
            text += f"\n  continue: {hint.format(id=final.get('id', ''))}"
        emit(opts["output"], {**final, "cli_outcome": "needs_person"}, text)
        sys.exit(EXIT_NEEDS_PERSON)
    text = f"{kind}: {describe(kind, final)} -> {outcome or 'timed out'}"
    if outcome is not None and outcome != "succeeded" and final.get("outcome_reason"):
        text += f"\n  reason: {final['outcome_reason']}"
    emit(opts["output"], {**final, "cli_outcome": outcome}, text)
    sys.exit(exit_code(outcome))


def _roll_back(api: Client, path: str, payload: dict, waits: str, opts: dict):
    """--fail-on-pause: ask for the rollback and wait for it to end (a failed outcome)."""
    reason = f"--fail-on-pause: it waited for {waits}"
    api.request("POST", f"{path}actions/", body={"action": "rollback", "reason": reason[:500]})
    with spinner("rolling back") as show:
        return wait_until_finished(
            api,
            "release",
            path,
            opts["timeout"],
            lambda p: show(describe("release", p)),
            stop_when_waiting=False,  # still paused until the next tick takes the rollback
        )


def idempotency_key(path: str, body: dict) -> str:
    """SWITCHYARD_IDEMPOTENCY_KEY (e.g. the CI job's id) made distinct per endpoint and
    target, so a retried job sends the same key for the same work; a fresh key otherwise."""
    base = os.environ.get("SWITCHYARD_IDEMPOTENCY_KEY")
    if not base:
        return uuid.uuid4().hex
    target = f"{body.get('model')}:{body.get('version') or body.get('candidate_version')}"
    return f"{base}:{path.strip('/').rsplit('/', 1)[-1]}:{target}"[:200]


def create(api: Client, path: str, body: dict) -> dict:
    """POST work with an Idempotency-Key, so a server that honours it never does it twice."""
    key = idempotency_key(path, body)
    return api.request("POST", path, body=body, headers={"Idempotency-Key": key})

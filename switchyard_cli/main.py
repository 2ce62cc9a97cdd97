"""`switchyard`: register, benchmark, deploy and release models from a CI job.

Exit codes: 0 succeeded, 1 failed or rolled back, 2 usage or API error, 3 timed out."""

import io
import json
import tarfile
from pathlib import Path

import click

from switchyard_cli.client import ApiError, Client, settings, write_config
from switchyard_cli.commands import cost, plan, release
from switchyard_cli.common import (
    API,
    MODEL_VERSION,
    api_command,
    client,
    create,
    emit,
    finish,
    idempotency_key,
    int_list,
    output_option,
    use_token_from,
    wait_options,
)
from switchyard_cli.output import upload_bar


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="switchyard")
@click.option(
    "--token-env",
    default=None,
    metavar="NAME",
    help="Read the token from this environment variable instead of SWITCHYARD_TOKEN (a CI "
    "job with one token per role: `switchyard --token-env RELEASE_TOKEN release start ...`).",
)
def cli(token_env) -> None:
    """Switchyard's command-line client (server from SWITCHYARD_URL, token from
    SWITCHYARD_TOKEN or the config file `switchyard login` writes)."""
    if token_env:
        use_token_from(token_env)


@cli.command()
@click.option("--url", default=None, help="Server URL (default: SWITCHYARD_URL or config).")
@click.option("--username", prompt=True)
@click.option("--password", prompt=True, hide_input=True)
@output_option
@api_command
def login(url, username, password, output) -> None:
    """Get a token and store it with the URL in the config file (mode 0600)."""
    url = (url or settings()[0]).rstrip("/")
    answer = Client(url, None).request(
        "POST", f"{API}/auth/token/", body={"username": username, "password": password}
    )
    path = write_config(url, answer["token"])
    emit(output, {"url": url, "config": str(path)}, f"token stored in {path}")


@cli.group()
def model() -> None:
    """Models and their versions."""


def archive_of(directory: Path, folder: int | None) -> bytes:
    """A .tar.gz of DIR's config.pbtxt and its version folder (only FOLDER when given)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            rel = path.relative_to(directory)
            if not path.is_file() or "__pycache__" in rel.parts or rel.name.startswith("."):
                continue
            if folder is not None and len(rel.parts) > 1 and rel.parts[0] != str(folder):
                continue
            tar.add(path, arcname=rel.as_posix(), recursive=False)
    return buf.getvalue()


SLA_FIELDS = ("p99_latency_ms", "min_success_rate", "max_queue_ms", "min_throughput_rps")
# A streaming model's: first token, time between tokens, tokens a second (95 % of streams).
SLA_FIELDS += ("p95_first_token_ms", "p95_inter_token_ms", "min_tokens_per_s")


def sla_options(fn):
    """--p99-latency-ms, --min-success-rate (%), --max-queue-ms, --min-throughput-rps, and a
    streaming model's --p95-first-token-ms, --p95-inter-token-ms, --min-tokens-per-s."""
    for name in reversed(SLA_FIELDS):
        flag = "--" + name.replace("_", "-")
        fn = click.option(flag, name, type=float, default=None, help=f"SLA {name}.")(fn)
    return fn


def sla_of(opts: dict) -> dict:
    """The SLA values given on the command line (taken out of opts)."""
    values = {name: opts.pop(name, None) for name in SLA_FIELDS}
    return {name: value for name, value in values.items() if value is not None}


def ensure_model(api: Client, name: str, team: str | None, sla: dict | None = None) -> None:
    try:
        api.request("GET", f"{API}/models/{name}/")
    except ApiError as exc:
        if exc.status != 404 or not team:
            raise
        body = {"name": name, "team": team, **({"sla": sla} if sla else {})}
        try:
            created = api.request("POST", f"{API}/models/", body=body)
        except ApiError as again:
            if again.status != 409:  # created meanwhile by a parallel job
                raise
            return
        for text in created.get("warnings") or []:
            click.echo(f"switchyard: warning: {text}", err=True)


@model.command("register")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--model", "model_name", required=True, help="Model name.")
@click.option("--label", required=True, help="Version label, e.g. the build number.")
@click.option("--team", default=None, help="Create the model for this team when missing.")
@click.option("--folder", type=int, default=None, help="Upload only this version folder.")
@click.option("--source-commit", default=None)
@click.option("--notes", default=None)
@click.option(
    "--return-existing",
    is_flag=True,
    help="When MODEL already has a version with these files (a re-run of the same build), "
    "answer that version instead of exiting 2 with the API's 409.",
)
@sla_options
@wait_options
@output_option
@api_command
def model_register(
    directory, model_name, label, team, folder, source_commit, notes, return_existing, **opts
):
    """Upload DIR (config.pbtxt and one version folder) as a new version of MODEL (the SLA
    options apply when --team creates the model; `model sla set` changes it later)."""
    api = client()
    ensure_model(api, model_name, team, sla_of(opts))
    data = archive_of(directory, folder)
    fields = {"label": label, "source_commit": source_commit, "notes": notes}
    with upload_bar(f"uploading {len(data)} bytes") as progress:
        path = f"{API}/models/{model_name}/versions/"
        key = idempotency_key(path, {"model": model_name, "version": label})
        query = "?return_existing=true" if return_existing else ""
        created = api.upload(path + query, fields, f"{label}.tar.gz", data, progress, key)
    for text in created.get("warnings") or []:
        click.echo(f"switchyard: warning: {text}", err=True)
    created.setdefault("id", f"{model_name}:{created.get('version')}")
    path = f"{API}/models/{model_name}/versions/{created.get('version')}/"
    finish(api, "version", path, created, opts)


@model.group("sla")
def model_sla() -> None:
    """A model's SLA (what releases' gates and benchmarks judge against)."""


@model_sla.command("set")
@click.argument("name")
@sla_options
@output_option
@api_command
def model_sla_set(name, output, **opts):
    """Set MODEL's SLA values given (the others are kept)."""
    sla = sla_of(opts)
    if not sla:
        raise click.UsageError(
            "give at least one of --" + ", --".join(SLA_FIELDS).replace("_", "-")
        )
    api = client()
    current = api.request("GET", f"{API}/models/{name}/").get("sla") or {}
    answer = api.request("PATCH", f"{API}/models/{name}/", body={"sla": {**current, **sla}})
    text = ", ".join(f"{k} {v}" for k, v in (answer.get("sla") or {}).items() if v is not None)
    emit(output, answer, f"{name}: SLA {text}")


@cli.group()
def version() -> None:
    """Model versions."""


@version.command("wait")
@click.argument("target", type=MODEL_VERSION)
@click.option("--timeout", type=float, default=900.0, show_default=True)
@output_option
@api_command
def version_wait(target, timeout, output):
    """Wait until MODEL:VERSION's smoke test finished (exit 1 when it failed)."""
    name, number = target
    path = f"{API}/models/{name}/versions/{number}/"
    finish(client(), "version", path, {}, {"wait": True, "timeout": timeout, "output": output})


@version.command("derive")
@click.argument("target", type=MODEL_VERSION)
@click.option(
    "--patch",
    "patch",
    default=None,
    help="Top-level config fields as JSON, each replacing the source's "
    "('{\"max_batch_size\": 32}').",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A whole new config.pbtxt.",
)
@click.option("--label", default=None, help="The new version's label (default v<number>).")
@click.option("--notes", default=None)
@wait_options
@output_option
@api_command
def version_derive(target, patch, config_file, label, notes, **opts):
    """A new version of MODEL with VERSION's files and a changed config (checked by the
    server as an upload is; exit 2 when refused)."""
    if (patch is None) == (config_file is None):
        raise click.UsageError("give either --patch or --config")
    api, (name, number) = client(), target
    body: dict = {"label": label, "notes": notes}
    if patch is not None:
        try:
            body["config_patch"] = json.loads(patch)
        except ValueError as exc:
            raise click.UsageError(f"--patch is not JSON: {exc}") from None
    else:
        body["config_text"] = config_file.read_text(encoding="utf-8")
    body = {k: v for k, v in body.items() if v is not None}
    path = f"{API}/models/{name}/versions/{number}/derive/"
    key = idempotency_key(path, {"model": name, "version": f"{number}-{label or ''}"})
    created = api.request("POST", path, body=body, headers={"Idempotency-Key": key})
    created.setdefault("id", f"{name}:{created.get('version')}")
    finish(api, "version", f"{API}/models/{name}/versions/{created.get('version')}/", created, opts)


@cli.group()
def benchmark() -> None:
    """Benchmarks."""


@benchmark.command("run")
@click.argument("target", type=MODEL_VERSION)
@click.option("--cluster", required=True)
@click.option("--concurrency", default="1,4,16", show_default=True)
@click.option("--duration", type=float, default=10.0, show_default=True, help="Seconds a level.")
@click.option(
    "--stream-body",
    default=None,
    help='A streaming model\'s generate request as JSON, e.g. \'{"PROMPT": "...", '
    '"MAX_TOKENS": 64}\' (a prompt and an output of set lengths).',
)
@wait_options
@output_option
@api_command
def benchmark_run(target, cluster, concurrency, duration, stream_body, **opts):
    """Benchmark MODEL:VERSION on CLUSTER (exit 1 when the verdict fails)."""
    api, (name, number) = client(), target
    body = {"model": name, "version": number, "cluster": cluster}
    body.update(concurrency=int_list(concurrency), duration_s=duration)
    if stream_body is not None:
        try:
            body["stream_body"] = json.loads(stream_body)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--stream-body") from None
    created = create(api, f"{API}/benchmarks/", body)
    finish(api, "benchmark", f"{API}/benchmarks/{created['id']}/", created, opts)


@cli.command()
@click.argument("target", type=MODEL_VERSION)
@click.option("--cluster", required=True)
@wait_options
@output_option
@api_command
def deploy(target, cluster, **opts):
    """Make MODEL:VERSION the only version CLUSTER serves (blue/green)."""
    api, (name, number) = client(), target
    body = {"cluster": cluster, "model": name, "version": number}
    created = create(api, f"{API}/deployments/", body)
    finish(api, "deployment", f"{API}/deployments/{created['id']}/", created, opts)


@cli.group()
def team() -> None:
    """Teams."""


@team.command("list")
@output_option
@api_command
def team_list(output):
    """The teams (the names `model register --team` takes) and their members."""
    api = client()
    teams = api.request("GET", f"{API}/teams/", query={"limit": 1000})
    for found in teams:
        members = api.request("GET", f"{API}/teams/{found['name']}/members/", query={"limit": 1000})
        found["members"] = [m.get("username") for m in members]
    lines = [f"{t['name']}: {', '.join(t['members']) or '(no members)'}" for t in teams]
    emit(output, teams, "\n".join(lines) or "no teams")


@cli.group()
def cluster() -> None:
    """Clusters."""


@cluster.command("show")
@click.argument("name")
@output_option
@api_command
def cluster_show(name, output):
    """CLUSTER's router URL (where clients send inference), nodes and what each serves."""
    api = client()
    detail = api.request("GET", f"{API}/clusters/{name}/")
    status = api.request("GET", f"{API}/clusters/{name}/status/")
    router = detail.get("router") or {}
    lines = [
        f"{detail.get('name')} ({detail.get('environment')})",
        f"  router: {router.get('url') or '(none)'}",
    ]
    for node in status.get("nodes", []):
        loaded = ", ".join(
            f"{model}:{','.join(str(v) for v in versions)}"
            for model, versions in sorted((node.get("loaded") or {}).items())
        )
        lines.append(
            f"  node {node.get('name')} {node.get('health')} {node.get('http_url')}: "
            f"{loaded or 'serves nothing'}"
        )
    emit(output, {**detail, "status": status}, "\n".join(lines))


cli.add_command(release)
cli.add_command(plan)
cli.add_command(cost)

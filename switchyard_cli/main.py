"""`switchyard`: register, benchmark, deploy and release models from a CI job.

Exit codes: 0 succeeded, 1 failed or rolled back, 2 usage or API error, 3 timed out."""

import io
import tarfile
from pathlib import Path

import click

from switchyard_cli.client import ApiError, Client, settings, write_config
from switchyard_cli.commands import cost, release
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
    wait_options,
)
from switchyard_cli.output import upload_bar


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="switchyard")
def cli() -> None:
    """Switchyard's command-line client (server from SWITCHYARD_URL, token from
    SWITCHYARD_TOKEN or the config file `switchyard login` writes)."""


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


def ensure_model(api: Client, name: str, team: str | None) -> None:
    try:
        api.request("GET", f"{API}/models/{name}/")
    except ApiError as exc:
        if exc.status != 404 or not team:
            raise
        try:
            api.request("POST", f"{API}/models/", body={"name": name, "team": team})
        except ApiError as again:
            if again.status != 409:  # created meanwhile by a parallel job
                raise


@model.command("register")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--model", "model_name", required=True, help="Model name.")
@click.option("--label", required=True, help="Version label, e.g. the build number.")
@click.option("--team", default=None, help="Create the model for this team when missing.")
@click.option("--folder", type=int, default=None, help="Upload only this version folder.")
@click.option("--source-commit", default=None)
@click.option("--notes", default=None)
@wait_options
@output_option
@api_command
def model_register(directory, model_name, label, team, folder, source_commit, notes, **opts):
    """Upload DIR (config.pbtxt and one version folder) as a new version of MODEL."""
    api = client()
    ensure_model(api, model_name, team)
    data = archive_of(directory, folder)
    fields = {"label": label, "source_commit": source_commit, "notes": notes}
    with upload_bar(f"uploading {len(data)} bytes") as progress:
        path = f"{API}/models/{model_name}/versions/"
        key = idempotency_key(path, {"model": model_name, "version": label})
        created = api.upload(path, fields, f"{label}.tar.gz", data, progress, key)
    created.setdefault("id", f"{model_name}:{created.get('version')}")
    path = f"{API}/models/{model_name}/versions/{created.get('version')}/"
    finish(api, "version", path, created, opts)


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


@cli.group()
def benchmark() -> None:
    """Benchmarks."""


@benchmark.command("run")
@click.argument("target", type=MODEL_VERSION)
@click.option("--cluster", required=True)
@click.option("--concurrency", default="1,4,16", show_default=True)
@click.option("--duration", type=float, default=10.0, show_default=True, help="Seconds a level.")
@wait_options
@output_option
@api_command
def benchmark_run(target, cluster, concurrency, duration, **opts):
    """Benchmark MODEL:VERSION on CLUSTER (exit 1 when the verdict fails)."""
    api, (name, number) = client(), target
    body = {"model": name, "version": number, "cluster": cluster}
    body.update(concurrency=int_list(concurrency), duration_s=duration)
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


cli.add_command(release)
cli.add_command(cost)

"""What the commands print: JSON on stdout for --output json, short text otherwise;
progress bars and spinners on stderr, and only when it is a terminal."""

import contextlib
import json
import sys

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn


def emit(output: str, payload, text: str) -> None:
    if output == "json":
        click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str))
    else:
        click.echo(text)


def interactive() -> bool:
    return sys.stderr.isatty()


@contextlib.contextmanager
def upload_bar(label: str):
    """Yield progress(sent, total); a Rich bar on a terminal, nothing otherwise."""
    if not interactive():
        yield lambda sent, total: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=None)
        yield lambda sent, total: progress.update(task, completed=sent, total=total)


@contextlib.contextmanager
def spinner(label: str):
    """Yield show(text): a Rich spinner on a terminal, nothing otherwise."""
    if not interactive():
        yield lambda text: None
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"))
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label)
        yield lambda text: progress.update(task, description=f"{label}: {text}")

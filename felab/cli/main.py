"""The `felab` command: one entry point whose sub-commands call felab_core services.

Each sub-command's module is imported only when that command runs (felab/cli/lazy.py), so
`felab bench` on a student's Mac loads the timing engine and nothing of the database, the bot
or the ingest.
"""

from __future__ import annotations

import os

import typer

from felab.cli.boundary import bounded, set_debug
from felab.cli.errors import err, warn
from felab.cli.lazy import Entry, lazy_group
from felab_core import __version__
from felab_core.failures import EXIT_USAGE, debug_setting_problem
from felab_core.settings import get_settings, unknown_setting_names

COMMANDS: dict[str, Entry] = {
    "bench": Entry("felab.cli.bench:bench", doc_help=True),
    "targets": Entry("felab.cli.bench:targets_cmd"),
    "presets": Entry("felab.cli.bench:presets_cmd"),
    "model": Entry("felab.cli.lab:model_app", group=True),
    "lab": Entry("felab.cli.lab:lab_app", group=True),
    "serve": Entry(
        "felab.cli.lab:serve", context={"allow_extra_args": True, "ignore_unknown_options": True}
    ),
    "size": Entry("felab.cli.size:size_app", group=True),
    "memo": Entry("felab.cli.memo:memo"),
    "compare": Entry("felab.cli.compare:compare"),
    "demo": Entry("felab.cli.demo:demo"),
    "content": Entry("felab.cli.content:content_app", group=True),
    "db": Entry("felab.cli.db:db_app", group=True),
    "drill": Entry("felab.cli.drill:drill"),
    "worker": Entry("felab.cli.worker:worker_app", group=True),
    "numbers": Entry("felab.cli.numbers:numbers_app", group=True),
    "bot": Entry("felab.cli.bot:bot_app", group=True),
    "broker": Entry("felab.cli.broker:broker_app", group=True),
    "status": Entry("felab.cli.status:status"),
}


app = typer.Typer(
    name="felab",
    cls=bounded(lazy_group(COMMANDS)),
    help="felab: learn, measure and size LLM serving. Time servers, size caches, drill the course.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"felab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(
        False,
        "--debug",
        help="Show the traceback when felab fails (for a bug report); FELAB_DEBUG=1 does too.",
    ),
) -> None:
    """felab's command line."""
    set_debug(debug)
    problem = debug_setting_problem()
    if problem:
        err(problem)
        raise typer.Exit(EXIT_USAGE)
    get_settings()  # every FELAB_ setting checked before any command runs: one line per bad one
    for line in unknown_setting_names(os.environ):
        warn(line)

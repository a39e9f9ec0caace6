"""The `felab` command: one entry point whose sub-commands call felab_core services."""

from __future__ import annotations

import typer

from felab_core import __version__

app = typer.Typer(
    name="felab",
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
) -> None:
    """felab's command line."""


# --- sub-commands are registered below, one line each ---
from felab_core.cli import bench as _bench  # noqa: E402

app.command("bench", help=_bench.bench.__doc__)(_bench.bench)
app.command("targets")(_bench.targets_cmd)
app.command("presets")(_bench.presets_cmd)
from felab_core.cli import lab as _lab  # noqa: E402

app.add_typer(_lab.model_app)
app.add_typer(_lab.lab_app)
app.command("serve", context_settings=_lab.SERVE_CONTEXT)(_lab.serve)
from felab_core.cli.size import size_app  # noqa: E402

app.add_typer(size_app, name="size")
from felab_core.cli.memo import memo as _memo  # noqa: E402

app.command("memo")(_memo)
from felab_core.cli.demo import demo as _demo  # noqa: E402

app.command("demo")(_demo)
from felab_core.cli.content import content_app  # noqa: E402
from felab_core.cli.db import db_app  # noqa: E402
from felab_core.cli.drill import drill as _drill  # noqa: E402

app.add_typer(content_app, name="content")
app.add_typer(db_app, name="db")
app.command("drill")(_drill)
from felab_core.cli.worker import worker_app  # noqa: E402

app.add_typer(worker_app, name="worker")
from felab_core.cli.numbers import numbers_app  # noqa: E402

app.add_typer(numbers_app, name="numbers")
from felab_core.cli.bot import bot_app  # noqa: E402

app.add_typer(bot_app, name="bot")

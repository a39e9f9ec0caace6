"""The `felab` command: one entry point whose sub-commands call felab_core services.

Each sub-command's module is imported only when that command runs, so `felab bench` on a
student's Mac loads the timing engine and nothing of the database, the bot or the ingest.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import click
import typer
from typer.core import TyperGroup

from felab_core import __version__


@dataclass(frozen=True)
class Entry:
    """Where a sub-command lives: `module:attr`, a typer app (a group) or a function."""

    target: str
    group: bool = False
    context: dict[str, Any] = field(default_factory=dict)
    doc_help: bool = False  # the function's docstring is the command's help


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
    "demo": Entry("felab.cli.demo:demo"),
    "content": Entry("felab.cli.content:content_app", group=True),
    "db": Entry("felab.cli.db:db_app", group=True),
    "drill": Entry("felab.cli.drill:drill"),
    "worker": Entry("felab.cli.worker:worker_app", group=True),
    "numbers": Entry("felab.cli.numbers:numbers_app", group=True),
    "bot": Entry("felab.cli.bot:bot_app", group=True),
}


def load_command(name: str, entry: Entry) -> click.Command:
    """Import one sub-command and turn it into the click command typer would have made."""
    module, attr = entry.target.split(":")
    obj = getattr(importlib.import_module(module), attr)
    if entry.group:
        cmd = typer.main.get_group(obj)
    else:
        single = typer.Typer(rich_markup_mode="rich")
        helptext = obj.__doc__ if entry.doc_help else None
        single.command(name, help=helptext, context_settings=entry.context or None)(obj)
        cmd = typer.main.get_command(single)
    cmd.name = name
    return cmd


class LazyGroup(TyperGroup):
    """A typer group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *COMMANDS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in COMMANDS:
            return found
        cmd = load_command(cmd_name, COMMANDS[cmd_name])
        self.add_command(cmd, cmd_name)
        return cmd


app = typer.Typer(
    name="felab",
    cls=LazyGroup,
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

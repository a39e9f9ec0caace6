"""Sub-commands imported on first use: `felab bench` on a student's Mac loads the timing engine
and nothing of the database, the bot or the ingest."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import typer
from typer import _click as click  # typer's own copy of click: its groups are these
from typer.core import TyperGroup

from felab.cli.file_names import refuse_folder_marks
from felab.cli.hidden_options import suggest_shown_only
from felab.cli.opposites import refuse_opposites
from felab.cli.plain_numbers import refuse_loose_numbers


@dataclass(frozen=True)
class Entry:
    """Where a sub-command lives: `module:attr`, a typer app (a group) or a function."""

    target: str
    group: bool = False
    context: dict[str, Any] = field(default_factory=dict)
    doc_help: bool = False  # the function's docstring is the command's help


#: What `felab[server]` adds: a command that needs one of these says so, and how to get it.
SERVER_ONLY = ("sqlalchemy", "alembic", "fsrs", "psycopg", "yaml", "discord")


class NeedsServerExtra(click.ClickException):
    exit_code = 2


def load_command(name: str, entry: Entry, path: str = "felab") -> click.Command:
    """Import one sub-command and turn it into the click command typer would have made."""
    module, attr = entry.target.split(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVER_ONLY:
            raise
        raise NeedsServerExtra(
            f"`{path} {name}` runs on the instructor's side and needs {exc.name}, which this "
            "install lacks: pip install 'felab[server]'"
        ) from None
    cmd: click.Command
    if entry.group:
        cmd = typer.main.get_group(obj)
    else:
        single = typer.Typer(rich_markup_mode="rich")
        helptext = obj.__doc__ if entry.doc_help else None
        single.command(name, help=helptext, context_settings=entry.context or None)(obj)
        cmd = typer.main.get_command(single)
    cmd.name = name
    refuse_opposites(cmd)
    refuse_folder_marks(cmd)
    refuse_loose_numbers(cmd)
    suggest_shown_only(cmd)
    return cmd


def lazy_group(commands: dict[str, Entry]) -> type[TyperGroup]:
    """A typer group class whose extra sub-commands, `commands`, are imported on first use."""

    class LazyGroup(TyperGroup):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return [*super().list_commands(ctx), *(c for c in commands if c not in self.commands)]

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            found = super().get_command(ctx, cmd_name)
            if found is not None or cmd_name not in commands:
                return found
            cmd = load_command(cmd_name, commands[cmd_name], ctx.command_path)
            self.add_command(cmd, cmd_name)
            return cmd

    return LazyGroup

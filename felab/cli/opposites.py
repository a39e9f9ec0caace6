"""A flag pair such as `--public/--private` given both ways is refused, and so is an option that
takes one value given twice (`--chart a.png --chart b.svg`).

Click settles both by the last one, silently: a person who typed both meant something, and
felab cannot tell what. Each loaded command is checked before it parses.
"""

from __future__ import annotations

from typing import Any

from typer import _click as click  # typer's own copy of click: its commands are these
from typer._click.exceptions import UsageError
from typer.core import TyperGroup, TyperOption


def refuse_opposites(cmd: click.Command) -> None:
    """Make `cmd` (and, for a group, every command under it) refuse both sides of a pair."""
    if isinstance(cmd, TyperGroup):
        for sub in cmd.commands.values():
            refuse_opposites(sub)
        return
    declared = [p for p in cmd.params if isinstance(p, TyperOption)]
    pairs = [p for p in declared if p.secondary_opts]
    # A command that passes unknown arguments on (`serve` to the server) may see its own
    # option's name among them: only the pairs are checked there.
    passes_on = cmd.ignore_unknown_options or cmd.allow_extra_args
    single = [p for p in declared if not (passes_on or p.is_flag or p.multiple or p.count)]
    if not pairs and not single:
        return
    parse = cmd.parse_args

    def parse_args(ctx: click.Context, args: list[str]) -> Any:
        options = args[: args.index("--")] if "--" in args else args
        for pair in pairs:
            on = next((a for a in options if a in pair.opts), None)
            off = next((a for a in options if a in pair.secondary_opts), None)
            if on is not None and off is not None:
                raise UsageError(f"{on} and {off} say opposite things: give one", ctx=ctx)
        for option in single:
            names = option.opts
            given = [a for a in options if a in names or any(a.startswith(n + "=") for n in names)]
            if len(given) > 1:
                shown = given[0].split("=", 1)[0]
                raise UsageError(f"{shown} is given twice: give it once", ctx=ctx)
        return parse(ctx, args)

    cmd.parse_args = parse_args  # type: ignore[method-assign]

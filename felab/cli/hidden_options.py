"""An option hidden from --help is never offered as click's "(Possible options: ...)".

Some commands take a hidden flag only to refuse it in words (`size capacity --model`); click
still counted it among the close matches, so `--model-bytes 8GB` was answered "Possible
options: --model", and following that advice met the refusal. The suggestions are worked out
again from the options --help shows.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any

from typer import _click as click  # typer's own copy of click: its commands are these
from typer._click.exceptions import NoSuchOption
from typer.core import TyperGroup, TyperOption


def _shown_names(cmd: click.Command, ctx: click.Context) -> list[str]:
    """The option names --help lists for `cmd` (with --help itself)."""
    names: list[str] = []
    for param in cmd.get_params(ctx):
        if isinstance(param, TyperOption) and not param.hidden:
            names.extend(n for n in (*param.opts, *param.secondary_opts) if n.startswith("-"))
    return names


def suggest_shown_only(cmd: click.Command) -> None:
    """Make `cmd` (and, for a group, every command under it) suggest only shown options."""
    if isinstance(cmd, TyperGroup):
        for sub in cmd.commands.values():
            suggest_shown_only(sub)
        return
    if not any(isinstance(p, TyperOption) and p.hidden for p in cmd.params):
        return
    parse = cmd.parse_args

    def parse_args(ctx: click.Context, args: list[str]) -> Any:
        try:
            return parse(ctx, args)
        except NoSuchOption as exc:
            exc.possibilities = get_close_matches(exc.option_name, _shown_names(cmd, ctx))
            raise

    cmd.parse_args = parse_args  # type: ignore[method-assign]

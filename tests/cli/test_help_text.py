"""Every --help text reads as written: rich, which renders it, takes `[word ...]` for markup and
drops it ("(0.001-1000) [default: 1]." had been shown as "(0.001-1000) .")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer
from rich.errors import StyleSyntaxError
from rich.markup import RE_TAGS
from rich.style import Style
from typer import _click as click  # typer's own copy of click: its groups are these
from typer.core import TyperGroup

from felab.cli.main import app


def _commands(command: Any, path: str = "felab") -> Iterator[tuple[str, Any]]:
    yield path, command
    if isinstance(command, TyperGroup):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from _commands(sub, f"{path} {name}")


def _is_style(tag: str) -> bool:
    try:
        Style.parse(tag)
    except StyleSyntaxError:
        return False
    return True


def test_no_help_text_holds_what_rich_would_take_for_markup() -> None:
    eaten = []
    for path, command in _commands(typer.main.get_command(app)):
        texts = [("", command.help or "")]
        texts += [
            (param.name or "", getattr(param, "help", None) or "") for param in command.params
        ]
        for name, text in texts:
            for match in RE_TAGS.finditer(text):
                escapes, tag = match.group(2), match.group(3)
                if escapes or tag.startswith("/") or _is_style(tag):  # markup meant as such
                    continue
                eaten.append(f"{path} {name}: [{tag}]")
    assert not eaten, eaten

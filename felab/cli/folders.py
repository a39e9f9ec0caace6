"""A folder named on the command line for felab to write into (`model tiny --out`, `broker tls
--dir`): refused when empty, '-', or holding control characters (an unset shell variable, a
pasted newline), before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from felab_core.text import holds_hidden


def folder_parser(example: str) -> Callable[[str], Path]:
    """A typer `parser` for a folder option; `example` is the flag as it should look."""

    def parse(value: str) -> Path:
        if not value.strip() or value.strip() == "-":
            raise typer.BadParameter(f"name the folder to write into, such as {example}")
        if holds_hidden(value):
            raise typer.BadParameter(
                "holds control or invisible characters (a pasted newline?): give a plain name"
            )
        return Path(value)

    return parse

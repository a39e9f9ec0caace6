"""A number on the command line is written in plain ASCII digits, '_' only between groups of
three (1_000, as felab's sizes read 1_024): `-n 1_0` and `-n １０` are refused, not read as 10.

Python's int() and float() accept an underscore between any digits and any Unicode digit, so
click would take `--rate 1_0` as 10 requests a second and `--warmup ３` as 3 without a word: a
typo or a pasted glyph quietly became a different run. Every int- or float-typed parameter of
each loaded command is checked before its value is converted; `nan` and `inf` pass on to the
command's own range check, which says what is wrong with them.
"""

from __future__ import annotations

from typing import Any

from typer import _click as click  # typer's own copy of click: its commands are these
from typer._click.exceptions import BadParameter
from typer.core import TyperGroup

from felab_core.text import loose_number_problem

_MARK = "_felab_plain_numbers"


def _number_kind(param: click.Parameter) -> type | None:
    desc = getattr(param, "type_descriptor", None)
    annotation = getattr(desc, "annotation", None)
    return annotation if annotation in (int, float) else None


def refuse_loose_numbers(cmd: click.Command) -> None:
    """Make every int- or float-typed parameter of `cmd` (and of the commands under a group)
    refuse a value written with '_' or non-ASCII digits."""
    if isinstance(cmd, TyperGroup):
        for sub in cmd.commands.values():
            refuse_loose_numbers(sub)
        return
    for param in cmd.params:
        kind = _number_kind(param)
        if kind is None or getattr(param, _MARK, False):
            continue
        process = param.process_value

        def checked(
            ctx: click.Context,
            value: Any,
            param: Any = param,
            process: Any = process,
            kind: type = kind,
        ) -> Any:
            for item in value if isinstance(value, (list, tuple)) else (value,):
                problem = isinstance(item, str) and loose_number_problem(item, kind)
                if problem:
                    raise BadParameter(problem, ctx=ctx, param=param)
            return process(ctx, value)

        param.process_value = checked  # type: ignore[method-assign]
        setattr(param, _MARK, True)

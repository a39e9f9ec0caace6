"""A number on the command line is written in plain ASCII digits, '_' only between groups of
three (1_000, as felab's sizes read 1_024): `-n 1_0` and `-n １０` are refused, not read as 10.

Python's int() and float() accept an underscore between any digits and any Unicode digit, so
click would take `--rate 1_0` as 10 requests a second and `--warmup ３` as 3 without a word: a
typo or a pasted glyph quietly became a different run. Every int- or float-typed parameter of
each loaded command is checked before its value is converted; `nan` and `inf` pass on to the
command's own range check, which says what is wrong with them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from typer import _click as click  # typer's own copy of click: its commands are these
from typer._click.exceptions import BadParameter
from typer.core import TyperGroup

_MARK = "_felab_plain_numbers"
# Digits, or digits grouped in threes by '_' (1_000), as felab's sizes read them (1_024).
_WHOLE = r"(?:[0-9]+|[0-9]{1,3}(?:_[0-9]{3})+)"
_INT = re.compile(rf"[+-]?{_WHOLE}")
_FLOAT = re.compile(rf"[+-]?(?:{_WHOLE}\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_FLOAT_WORDS = {"nan", "inf", "infinity", "+inf", "-inf", "+infinity", "-infinity"}


def _number_kind(param: click.Parameter) -> type | None:
    desc = getattr(param, "type_descriptor", None)
    annotation = getattr(desc, "annotation", None)
    return annotation if annotation in (int, float) else None


def loose_number_problem(text: str, kind: type) -> str | None:
    """Why `text` is not a plain number of `kind` (int or float), or None when it is one."""
    plain = text.strip()
    if kind is float and plain.lower() in _FLOAT_WORDS:
        return None
    pattern = _INT if kind is int else _FLOAT
    if pattern.fullmatch(plain):
        return None
    if "_" in plain:
        why = "has a '_' that is not between groups of three digits (1_000)"
    elif not plain.isascii():
        why = "is not written in plain digits 0-9"
    else:
        return None  # not a number at all: click's own message says so
    meant = "".join(str(unicodedata.digit(c)) if c.isdigit() else c for c in plain if c != "_")
    example = meant if pattern.fullmatch(meant) else ("10" if kind is int else "2.5")
    return f"{text!r} {why}: write the number in digits 0-9, such as {example}"


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

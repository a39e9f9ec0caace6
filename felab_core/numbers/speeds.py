"""Typed speeds: a figure as a member wrote it, read strictly into tokens per second."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from felab_core.db import models as m
from felab_core.engine.token_counts import MAX_SERVER_TPS
from felab_core.errors import Invalid
from felab_core.redact import redact
from felab_core.text import echo_of

MAX_PLAUSIBLE_TPS = MAX_SERVER_TPS  # one stream's fastest, as a server's own figure is bounded
#: Below this no one is watching text appear (one token every 100 s): a typo, most likely.
MIN_PLAUSIBLE_TPS = 0.01

_TPS_UNITS = {
    "tokens/s",
    "token/s",
    "tok/s",
    "t/s",
    "tps",
    "tokens per second",
    "tokens/sec",
    "tok/sec",
    "tokens a second",
}
_MS_PER_TOKEN_UNITS = {"ms/token", "ms/tok", "ms per token"}
_NUMBER = re.compile(
    r"^\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)(?![\d,.])\s*(.*?)\s*$"
)


TPS_UNIT = "tok/s"
MS_PER_TOKEN_UNIT = "ms/token"


@dataclass(frozen=True)
class Speed:
    """A writing speed in tokens per second, and how it was written: the number as typed
    (digits kept, thousands separators dropped) in its unit, tok/s or ms/token."""

    tokens_per_s: float
    note: str = ""
    typed_value: str = ""
    typed_unit: str = TPS_UNIT

    @property
    def typed(self) -> str:
        return as_typed(self.typed_value, self.typed_unit)


def as_typed(value: str, unit: str) -> str:
    """A figure as the member typed it: '44.6' (tokens per second), '22.4 ms/token'."""
    return value if unit == TPS_UNIT else f"{value} {unit}"


def typed_text(number: m.Number) -> str:
    """How a typed-in number is shown back: as typed, with tokens per second beside a figure
    typed in another unit ('22.4 ms/token (44.6 tok/s)'); a figure recorded before felab kept
    the typing, or a measured one, in tokens per second."""
    tps = f"{number.value:.1f} tok/s"
    if not number.typed_value:
        return tps
    if (number.typed_unit or TPS_UNIT) == TPS_UNIT:
        if not number.typed_value.isascii():  # '٣٣' or '４４': say the figure it was read as
            return f"{number.typed_value} tok/s ({tps})"
        return f"{number.typed_value} tok/s"
    return f"{as_typed(number.typed_value, number.typed_unit or TPS_UNIT)} ({tps})"


def _amount(x: float) -> str:
    """A large figure readably: 10,000,000 up to a billion, then 1e+300."""
    return f"{x:,.0f}" if x < 1e9 else f"{x:.3g}"


def _echo(typed: str) -> str:
    """What was typed, quoted back (in chat too): its start only, secrets masked."""
    return echo_of(redact(typed), 30)


def parse_speed(value: str | float | int, unit: str | None = None) -> Speed:
    """Read a typed writing speed: '44.6', '44.6 tok/s', '22.4 ms/token' (converted).

    Refuses words per second (not the course's measure), unknown units, zero, negatives,
    infinities and figures no single conversation can reach.
    """
    if isinstance(value, bool):
        raise Invalid("expected a number of tokens per second, got a yes/no value")
    if unit is not None and not unit.strip():  # '' read as tok/s: an unfilled shell variable?
        raise Invalid(
            "the unit given is empty: give tok/s or ms/token, or leave the unit out for tok/s"
        )
    if isinstance(value, int | float):
        number = float(value)
        digits = repr(value) if isinstance(value, float) else str(value)
        rest = unit or ""
        if math.isnan(number) or math.isinf(number):
            raise Invalid(f"expected a finite number of tokens per second, got {value}")
        if number <= 0:
            raise Invalid(f"a writing speed must be more than zero tokens per second, got {value}")
    else:
        text = value.strip()
        if text.startswith("-"):
            raise Invalid(f"a writing speed must be more than zero tokens per second, got {text!r}")
        if re.search(r"\d_\d", text):  # Python reads 1_0 as 10; a person may mean 1.0
            raise Invalid(
                f"{_echo(text)} has a '_' between digits: write the number with digits and a "
                f"decimal point only, such as {text.replace('_', '')} or 44.6"
            )
        if re.match(r"0[xXoObB][0-9a-fA-F]", text):  # 0x10 had read as 0 in the unit 'x10'
            raise Invalid(
                f"{_echo(text)} is a number in another base: write the speed in decimal digits, "
                "such as 44.6"
            )
        match = _NUMBER.match(text)
        if not match:
            comma = ": write a decimal point, 44.6, not 44,6" if "," in text else ""
            raise Invalid(
                f"could not read {_echo(text)} as a writing speed: write a number of tokens per "
                f"second, such as 44.6{comma}"
            )
        digits = match.group(1).replace(",", "")
        if len(digits) > 30:
            raise Invalid(f"{digits[:12]}… has more digits than any timing script prints")
        number = float(digits)
        if math.isinf(number):
            raise Invalid(f"{digits} tokens per second is out of range (more than any float)")
        written = match.group(2)
        if written and unit and " ".join(written.lower().split()) != " ".join(unit.lower().split()):
            raise Invalid(  # '44.6 ms/token' tok/s stored 22.4 tok/s: the value's unit won
                f"{_echo(text)} holds its unit and {_echo(unit)} names another: give the unit "
                "once, such as 44.6 tok/s"
            )
        rest = written or unit or ""
    unit_text = " ".join(rest.lower().split())
    note = ""
    typed_unit = TPS_UNIT
    if unit_text in ("", *_TPS_UNITS):
        tps = number
    elif unit_text in _MS_PER_TOKEN_UNITS:
        if number <= 0:
            raise Invalid("time per token must be more than zero milliseconds")
        tps = 1000.0 / number
        typed_unit = MS_PER_TOKEN_UNIT
        note = f"{digits} ms per token = {tps:.1f} tokens per second"
    elif "word" in unit_text:
        raise Invalid(
            "felab records tokens per second, not words: a token is about three quarters of a "
            "word, so give the tokens/s figure your timing script printed"
        )
    else:
        raise Invalid(
            f"unknown unit {_echo(rest)}: give tokens per second (tokens/s, tok/s) or "
            "milliseconds per token (ms/token)"
        )
    if tps <= 0:
        raise Invalid(f"a writing speed must be more than zero tokens per second, got {value}")
    if tps < MIN_PLAUSIBLE_TPS:
        raise Invalid(
            f"{tps:g} tokens per second is one token every {_amount(1 / tps)} s, no writing speed: "
            "check the unit (tokens per second, or ms/token) and the decimal point"
        )
    if tps > MAX_PLAUSIBLE_TPS:
        raise Invalid(
            f"{_amount(tps)} tokens per second is beyond any single conversation on any machine; "
            "check the unit (per second, not per minute) and that it is one person's speed"
        )
    return Speed(tps, note, digits, typed_unit)


# ----------------------------------------------------------------------------- speed limit

"""How the pack's YAML reader (PyYAML, YAML 1.1) reads plain numbers, in one place: the
numbers it reads that a person does not mean (10:00 is 600), and the form it needs for a number
with an exponent (4.0e+1, not 4e1 or 4.0e1), so advice and what is accepted cannot part.
"""

from __future__ import annotations

import re

import yaml

#: Plain YAML 1.1 numbers a person does not mean: 10:00 is 600 (base 60), 0x2 and 012 are hex
#: and octal, 1_0 is 10. `minutes: 10:00` had been stored as 600 minutes.
_SURPRISE_NUMBER = re.compile(
    r"[-+]?(?:[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"  # base 60
    r"|0b[01_]+|0x[0-9a-fA-F_]+|0[0-7_]+"  # binary, hex, octal (012)
    r"|[0-9]+_[0-9_]*(?:\.[0-9_]*)?)"  # digits grouped by _
)


def number_surprise(event: yaml.ScalarEvent) -> str | None:
    """Why a plain scalar would be read as a number its writer did not mean (None if not)."""
    value = event.value
    if event.style is not None or not _SURPRISE_NUMBER.fullmatch(value):
        return None
    number = yaml.safe_load(value)
    if isinstance(number, bool) or not isinstance(number, int | float):
        return None
    return (
        f"{value[:40]} is read by YAML as the number {number!r} (base 60, hex, "
        "octal or grouped by _): write the number plainly (10 for ten minutes), or quote it "
        f"('{value[:40]}') to keep it as text"
    )


_EXPONENT = re.compile(r"([-+]?)([0-9]*)(?:\.([0-9]*))?[eE]([-+]?)([0-9]+)")


def yaml_number_form(text: str) -> str | None:
    """How to write `text`, a number with an exponent that YAML 1.1 reads as text (4e1, 1.0e3:
    its floats need a dot and a signed exponent), so that the pack's reader reads a number
    (4.0e+1); None for any other text. The form given is checked with that reader itself, so
    the advice and what is accepted cannot part (sweep 24, M2: 1.0e3 had been advised)."""
    found = _EXPONENT.fullmatch(text.strip())
    if found is None:
        return None
    sign, whole, part, exp_sign, exp = found.groups()
    if not (whole or part):
        return None
    form = f"{sign}{whole or '0'}.{part or '0'}e{exp_sign or '+'}{exp}"
    return form if isinstance(yaml.safe_load(form), float) else None

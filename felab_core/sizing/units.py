"""Exact numbers and their display: bytes in GB and GiB side by side, rounding only when shown.

The course mixes decimal units (4.29 GB, 273 GB/s) with binary ones (128 KiB, 4,096 MiB), so every
byte count here can be shown both ways. Arithmetic stays in integers and `Fraction`s; rounding
happens once, in the text, half away from zero (the way people round on paper, not Python's
round-half-to-even).
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

from felab_core.sizing.errors import SizingError
from felab_core.text import echo_of

#: The most tokens any sizing question takes (a cache, a context, a block): a billion, 100
#: times the longest context served today, so a typo (an extra zero run) is refused, not sized.
MAX_TOKENS = 1_000_000_000

KB = 1000
MB = 1000**2
GB = 1000**3
#: Fewer bytes than any model file: felab's own tiny test model is 703 kB (1 kB had passed
#: here and printed billions of tokens a second, while `numbers model` refused under 1 MB).
MIN_WEIGHTS_BYTES = 100 * KB
TB = 1000**4
KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

Number = int | Fraction

_DECIMAL_UNITS: tuple[tuple[str, int], ...] = (("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB))
_BINARY_UNITS: tuple[tuple[str, int], ...] = (
    ("TiB", TiB),
    ("GiB", GiB),
    ("MiB", MiB),
    ("KiB", KiB),
)

# Units accepted when a person types a size; "G" alone is refused because it could mean either.
_SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
}

_PER_SECOND = re.compile(r"/\s*[sS]\s*$")
_NUMBER_RE = re.compile(r"^\s*([+-]?[\d,_]*\.?\d+(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*(?:/\s*s)?\s*$")


#: Past this a typed number is a typo, not a size (a yottabyte; 10^24 tokens): refused, and
#: never turned into an exact fraction whose digits alone would take minutes to write out.
LARGEST = 10**24


def _bounded(value: Fraction, shown: object) -> Fraction:
    if abs(value) > LARGEST:
        raise SizingError(f"{shown!s} is out of range: felab takes numbers up to 1e24")
    return value


_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?([eE][+-]?\d+)?$")


def as_fraction(value: int | float | str | Decimal | Fraction) -> Fraction:
    """Turn a typed number into an exact fraction; floats go through their text, so 4.9 is 49/10.

    NaN, infinity and numbers past 1e24 are refused with a message, never carried along."""
    if isinstance(value, Fraction):
        return _bounded(value, value)
    if isinstance(value, bool):
        raise SizingError("expected a number, got a yes/no value")
    if isinstance(value, int):
        return _bounded(Fraction(value), value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise SizingError(f"expected a finite number, got {value}")
        return _bounded(Fraction(repr(value)), value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise SizingError(f"expected a finite number, got {value}")
        return _bounded(Fraction(value), value)
    typed = value.strip()
    if any(c.isdigit() and not c.isascii() for c in typed):  # float() reads ２７３ and ٢٧٣
        raise SizingError(f"{value!r} is not written in digits 0-9: type the number with them")
    if "," in typed and not _THOUSANDS.match(typed):
        raise SizingError(
            f"{value!r}: felab reads a comma only between groups of three digits (1,024); "
            "write a decimal point: 4.9, not 4,9"
        )
    if "_" in typed and not _THOUSANDS.match(typed.replace("_", ",")):
        raise SizingError(
            f"{value!r}: felab reads an underscore only between groups of three digits "
            "(1_024); is it a typo?"
        )
    text = typed.replace(",", "").replace("_", "")
    exponent = re.search(r"[eE]([+-]?\d+)$", text)
    if exponent and abs(int(exponent.group(1))) > 30:
        raise SizingError(f"{value!r} is out of range: felab takes numbers from 1e-24 to 1e24")
    try:
        number = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise SizingError(f"expected a number, got {value!r}") from None
    return _bounded(number, repr(value))  # its own message: a number, but out of range


def require_positive(what: str, value: int | Fraction | float, hint: str = "") -> None:
    """Refuse zero and negative sizes with a message naming the value and what to give instead."""
    if value <= 0:
        shown = value if not isinstance(value, Fraction) else tidy_text(value, 4)
        extra = f" {hint}" if hint else ""
        raise SizingError(f"{what} must be more than zero (got {shown}).{extra}")


#: The slowest writing speed felab reads as one (a token every 1,000 s; c C24: 1e-30 had been
#: taken). Slower ones are refused; those above are shown to their first figure (figure_text).
LEAST_SPEED = Fraction(1, 1000)


def require_speed(what: str, value: Fraction, hint: str = "") -> None:
    """Refuse a writing speed of zero or less, or too slow to show (LEAST_SPEED)."""
    require_positive(what, value, hint)
    if value < LEAST_SPEED:
        raise SizingError(
            f"{what} of {float(value):g} tokens per second is less than one token every "
            f"{float(1 / LEAST_SPEED):,.0f} s, which shows as 0.0.{' ' + hint if hint else ''}"
        )


def require_whole(what: str, value: int, hint: str = "") -> int:
    """Refuse counts that are not whole positive numbers (blocks, layers, tokens)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SizingError(f"{what} must be a whole number (got {value!r}).")
    require_positive(what, value, hint)
    return value


def round_half_up(value: Fraction, places: int) -> Decimal:
    """Round an exact fraction to `places` decimals, halves away from zero."""
    with localcontext() as ctx:
        ctx.prec = 60
        quantum = Decimal(1).scaleb(-places)
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        return exact.quantize(quantum, rounding=ROUND_HALF_UP)


def decimal_text(value: Number, places: int = 2, *, group: bool = True) -> str:
    """Show a number with a fixed count of decimals and thousands commas: 16.08, 131,744."""
    rounded = round_half_up(Fraction(value), places)
    return f"{rounded:,.{places}f}" if group else f"{rounded:.{places}f}"


def whole_text(value: Number) -> str:
    """Show a count with thousands commas, rounding half up if it is not whole: 131,744."""
    return decimal_text(value, 0)


def figure_text(value: Number, places: int = 1) -> str:
    """A speed or a share to `places` decimals, or to its first figure when that would show a
    figure above zero as 0 ('0.001 tokens per second is 0.0002 %', not '0.0 ... 0 %')."""
    frac = Fraction(value)
    while frac and not round_half_up(abs(frac), places):
        places += 1
    return decimal_text(frac, places)


def tidy_text(value: Number, places: int = 2) -> str:
    """Show a whole number without decimals, anything else to `places` decimals, zeros trimmed."""
    frac = Fraction(value)
    if frac.denominator == 1:
        return f"{frac.numerator:,}"
    text = decimal_text(frac, places)
    return text.rstrip("0").rstrip(".") if "." in text else text


def article(value: Number) -> str:
    """'a' or 'an' before a number said aloud: an 8,000-token prompt, an 11-token reply, a 2,048."""
    lead = whole_text(value).split(",")[0]
    return "an" if lead.startswith("8") or lead in ("11", "18") else "a"


def bytes_text(value: Number) -> str:
    """A byte count with its word: '1 byte', '2 bytes', '0.5 bytes', '131,072 bytes'."""
    return f"{tidy_text(value)} {'byte' if Fraction(value) == 1 else 'bytes'}"


def about_text(value: Number) -> str:
    """Show a rate the way the course does: 'about 56' (whole numbers, rounded half up).

    Under a half it keeps its first figure ('about 0.05'): 'about 0' would say nothing at all.
    """
    frac = Fraction(value)
    if 0 < frac < Fraction(1, 2):
        places = 1
        while frac * 10**places < 1:
            places += 1
        return f"about {decimal_text(frac, places).rstrip('0').rstrip('.')}"
    return f"about {whole_text(value)}"


def about_words(tokens: Number) -> int:
    """A rough word count for a token count: three quarters of it, rounded to a figure people say.

    Under 100 words to the whole word (44.6 tokens/s: about 33 words), under 1,000 to the
    nearest 50, above that to the nearest 500 (8,192 tokens: about 6,000 words).
    """
    words = Fraction(tokens) * 3 / 4
    step = 1 if words < 100 else 50 if words < 1000 else 500
    return int(round_half_up(words / step, 0)) * step


def in_unit(value: Number, unit: int) -> Fraction:
    """Exact value of a byte count in a unit (GB, GiB, MiB ...)."""
    return Fraction(value) / unit


def gb_text(value: Number, places: int = 2) -> str:
    """Bytes in decimal gigabytes: 4,294,967,296 -> '4.29 GB'."""
    return f"{decimal_text(in_unit(value, GB), places)} GB"


def size_text(value: Number, places: int = 1) -> str:
    """Bytes as the memo and the speed limit show them: GB to `places` decimals from 1 GB up,
    below it in MB or kB ('703.13 kB', '500 MB'), so a small model never reads '0.0 GB'."""
    if abs(Fraction(value)) >= GB:
        return gb_text(value, places)
    return decimal_size_text(value)


def gib_text(value: Number, places: int = 2) -> str:
    """Bytes in binary gibibytes: 4,294,967,296 -> '4.00 GiB'."""
    return f"{decimal_text(in_unit(value, GiB), places)} GiB"


def mib_text(value: Number, places: int = 2) -> str:
    """Bytes in mebibytes, without decimals when exact: 4,294,967,296 -> '4,096 MiB'."""
    return f"{tidy_text(in_unit(value, MiB), places)} MiB"


def _trimmed(value: Fraction, places: int = 2) -> str:
    """Up to `places` decimals without trailing zeros: 4.9, 4.56, 128."""
    text = decimal_text(value, places)
    return text.rstrip("0").rstrip(".") if "." in text else text


def _pick(value: Fraction, units: tuple[tuple[str, int], ...], smallest: str) -> str:
    for name, size in units:
        if abs(value) >= size:
            return f"{_trimmed(value / size)} {name}"
    return f"{_trimmed(value)} {smallest}"


def decimal_size_text(value: Number) -> str:
    """Bytes in the largest decimal unit keeping the number at 1 or more: '4.29 GB'."""
    return _pick(Fraction(value), _DECIMAL_UNITS, "bytes")


def binary_size_text(value: Number) -> str:
    """Bytes in the largest binary unit that keeps the number at 1 or more: '128 KiB', '4 GiB'."""
    return _pick(Fraction(value), _BINARY_UNITS, "bytes")


def both_ways(value: Number) -> str:
    """One byte count in decimal and binary units: '4.29 GB = 4 GiB'; small ones in bytes."""
    frac = Fraction(value)
    dec = decimal_size_text(frac)
    binary = binary_size_text(frac)
    if abs(frac) < MB:  # "1,000 bytes (1,000 bytes)" said it twice (c C22)
        plain = f"{tidy_text(frac)} bytes"
        return plain if binary == plain else f"{plain} ({binary})"
    return f"{dec} = {binary}"


def parse_bytes(text: str | int | float, default_unit: str = "bytes") -> Fraction:
    """Read a size a person typed ('4.9 GB', '128 KiB', '4912898304') as exact bytes.

    A bare number is taken in `default_unit`. 'G', 'M' alone are refused: say GB or GiB.
    """
    if isinstance(text, (int, float)):
        number = as_fraction(text)
        unit = default_unit
    else:
        match = _NUMBER_RE.match(text)
        if not match:
            raise SizingError(
                f"could not read {text!r} as a size: write a number and a unit, such as 4.9 GB, "
                "4.56 GiB or 4912898304"
            )
        if _PER_SECOND.search(text):  # '273 GB/s' was stored as a 273 GB model file
            raise SizingError(
                f"{text!r} is a speed (per second), not a size: write the size in bytes, such "
                "as 4.9 GB"
            )
        number = as_fraction(match.group(1))
        unit = match.group(2) or default_unit
    if len(unit) == 2 and unit[0].isupper() and unit[1] == "b":  # Gb, Mb, Tb: bits, not bytes
        raise SizingError(
            f"{unit!r} in {text!r} reads as bits: felab sizes in bytes; write {unit[0]}B"
        )
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise SizingError(
            f"unknown size unit {unit!r} in {text!r}: use bytes, kB, MB, GB, TB (powers of 1000) "
            "or KiB, MiB, GiB, TiB (powers of 1024)"
        )
    return number * factor


def parse_model_bytes(
    text: str | int | float, flag: str = "--model-bytes", table: bool = True
) -> Fraction:
    """A model's weights in bytes, read as parse_bytes reads a size; '8b' or '70B' is refused
    as 8 bytes (no model file) that reads like a parameter count (8 billion): "8 bytes of
    weights is no model" had not said what the flag takes. `table`: the command also takes
    --model NAME --bits-per-weight, which sizes from the parameter count."""
    typed = text.strip() if isinstance(text, str) else ""
    match = _NUMBER_RE.match(typed)
    if match and match.group(2) in ("b", "B") and "/" not in typed:
        count = as_fraction(match.group(1))
        # 0.1 to 10,000: a parameter count in billions someone could mean (0.000001B is not)
        if Fraction(1, 10) <= count <= min(10_000, MIN_WEIGHTS_BYTES):
            shown = tidy_text(count)
            via = (
                "; or give the model by name, --model NAME --bits-per-weight 16, and felab "
                "sizes it from its parameter count"
                if table
                else ""
            )
            raise SizingError(
                f"{flag} {typed} is {shown} {'byte' if count == 1 else 'bytes'}, no model "
                f"file; it reads like {shown} billion parameters: "
                f"{flag} takes the weights' size, such as 16GB ({shown}B parameters at 16-bit "
                f"are about {tidy_text(count * 2)} GB; a 4-bit file, about "
                f"{decimal_text(count * Fraction(9, 16), 1)} GB){via}"
            )
    return parse_bytes(text)


def parse_bandwidth(text: str | int | float) -> Fraction:
    """Read a memory bandwidth ('273', '273 GB/s', '3.35 TB/s') as exact bytes per second.

    A bare number means GB/s, the unit every spec sheet uses.
    """
    given = text
    if isinstance(text, str):
        match = _NUMBER_RE.match(text)  # one "/s" at most: "273 GB/s/s" is no bandwidth
        if not match:
            raise SizingError(
                f"could not read {echo_of(text)} as a memory bandwidth: write a number of GB/s, "
                "such as 273 or '3.35 TB/s'"
            )
        number, unit = match.group(1), match.group(2)
        if unit.endswith("Bps") and len(unit) > 3:  # GBps: bytes per second, said another way
            unit = unit.removesuffix("ps")
        elif unit.endswith("bps"):  # Gbps: a network's bits, 8 to a byte
            raise SizingError(
                f"{echo_of(text)} is in bits per second; memory bandwidth is written in bytes "
                "per second (8 bits to a byte), such as 273 GB/s"
            )
        elif unit and not _PER_SECOND.search(text):  # 4.9GB: a size, not a speed
            raise SizingError(
                f"{echo_of(text)} is a size, not a memory bandwidth: write it per second, such "
                "as 273 GB/s (a bare number is GB/s)"
            )
        text = f"{number} {unit}"
    value = parse_bytes(text, default_unit="GB")
    if value <= 0:
        raise SizingError(f"a memory bandwidth must be more than zero (got {echo_of(str(given))})")
    if not MIN_BANDWIDTH <= value <= MAX_BANDWIDTH:
        raise SizingError(
            f"a memory bandwidth of {echo_of(str(given))} is out of range: felab takes 1 GB/s to "
            "100 TB/s "
            "(a laptop has tens to hundreds of GB/s, an H200 4.8 TB/s)"
        )
    return value


#: The slowest memory worth sizing (a small board's) and more than any node of chips has.
MIN_BANDWIDTH = 1 * GB
MAX_BANDWIDTH = 100_000 * GB

"""Text a member typed (a display name, a cohort or machine name), shown as typed in chat.

Chat messages are Markdown with mentions: a name such as `<@&123> Bob` or `**x**` would
otherwise become a role mention or bold type in every post that quotes it. `literal` keeps such
text inert in running text; `in_code` does the same inside a code block, where Markdown escapes
do not work. (The bot also sends every message with mentions disabled: this keeps names from
even looking like a mention.)

`holds_hidden` is the one test for text a person or a results row gives (a model name, a
label, a CSV cell, a URL): whether it holds characters a reader cannot see; `formula_mark` the
one test for a name that a spreadsheet would run as a formula.
"""

from __future__ import annotations

import re
import shlex
import unicodedata

_MARKDOWN = re.compile(r"([\\*_~`|>#\[\]])")
# A byte that was not UTF-8, as Python keeps it (surrogateescape), and as repr then shows it.
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
_ESCAPED_BYTE = re.compile(r"\\udc([89a-f][0-9a-f])")
ZERO_WIDTH_SPACE = "\u200b"

#: Control characters (Cc: an escape code, a NUL, a line break) and invisible format characters
#: (Cf: U+202E that reverses what follows it, U+200B zero-width space, U+FEFF): text holding
#: one does not read as it is, in a terminal, a chat post or a leaderboard. And lone
#: surrogates (Cs: JSON's "\ud800", or a file name's byte that was not UTF-8): no UTF-8 text
#: holds one, and printing or saving it stops with UnicodeEncodeError.
_HIDDEN_CATEGORIES = frozenset(("Cc", "Cf", "Cs"))


def is_hidden(char: str) -> bool:
    """Whether one character is a control or an invisible format character."""
    return unicodedata.category(char) in _HIDDEN_CATEGORIES


def holds_hidden(text: str, *, allowed: str = "") -> bool:
    """Whether `text` holds a control or invisible format character (other than `allowed`,
    such as the line breaks and tabs of a multi-line text)."""
    if text.isprintable():  # the common case, in C: Cc and Cf are never printable
        return False
    return any(unicodedata.category(c) in _HIDDEN_CATEGORIES and c not in allowed for c in text)


#: A cell that begins with one of these is run as a formula when a spreadsheet opens the CSV
#: (=, +, - and @ all start one): no server, model, machine or target name begins so.
FORMULA_MARKS = ("=", "+", "-", "@")


#: What a formula needs past its first character to do harm: a call, a DDE link, a sheet or
#: another formula. A model id such as @cf/meta/llama-3-8b holds none of them.
_FORMULA_PARTS = re.compile(r"[()|!=+]")


def formula_mark(text: str, *, allowed: str = "") -> str:
    """The character a name begins with that makes a spreadsheet run it, or ''. A model's name
    may begin with '@' (`allowed`): Cloudflare's are @cf/..., and there it names no function;
    an '@' followed by a call or a link (@SUM(1), @cmd|...) is a formula all the same."""
    first = text.lstrip()[:1]
    if first not in FORMULA_MARKS:
        return ""
    if first in allowed and not _FORMULA_PARTS.search(text):
        return ""
    return first


def spreadsheet_cell(value: object) -> object:
    """`value` for a CSV an instructor opens in a spreadsheet: text that would run as a
    formula there (a member's display name `=HYPERLINK(...)`) is kept as text by a leading
    apostrophe, as spreadsheets themselves write it; numbers pass unchanged."""
    if not isinstance(value, str) or not formula_mark(value):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value  # a signed number, such as -0.5


def with_hidden_shown(text: str) -> str:
    """`text` for a terminal, each invisible or control character shown as '?' (a server's
    or a file's words: an escape code must not reach the screen)."""
    return "".join("?" if is_hidden(c) else c for c in text)


def echo_of(text: str, limit: int = 40) -> str:
    """What a person typed, quoted for an error: at most `limit` characters (a pasted page or
    random bytes are not repeated back whole), control characters escaped by repr.

    Bytes that were not UTF-8 (kept by Python as lone surrogates, '\\udcff') show as the bytes
    they were ('\\xff'), and say so."""
    shown = repr(text[:limit]) + ("..." if len(text) > limit else "")
    if _NOT_UTF8.search(text[:limit]):
        shown = _ESCAPED_BYTE.sub(r"\\x\1", shown) + " (bytes that are not UTF-8)"
    return shown


def shell_word(text: str, placeholder: str, limit: int = 80) -> str:
    """What a person typed, as one word of a command line felab suggests: quoted for a POSIX
    shell (`a'b $(id)` pasted in double quotes, as repr gives them, would run `id`). Text a
    reader cannot see, longer than `limit`, or empty is not repeated: `placeholder` (NAME)
    stands in for it."""
    if not text.strip() or len(text) > limit or holds_hidden(text):  # '' names nothing
        return placeholder
    return shlex.quote(text)


def literal(text: str) -> str:
    """`text` as it reads, for Markdown running text: markup escaped, no mention possible."""
    return _MARKDOWN.sub(r"\\\1", text).replace("@", "@" + ZERO_WIDTH_SPACE)


def in_code(text: str) -> str:
    """`text` for a code block: no backtick to close the block early, no mention."""
    return text.replace("`", "'").replace("@", "@" + ZERO_WIDTH_SPACE)


# Digits, or digits grouped in threes by '_' (1_000), as felab's sizes read them (1_024).
_WHOLE = r"(?:[0-9]+|[0-9]{1,3}(?:_[0-9]{3})+)"
_INT = re.compile(rf"[+-]?{_WHOLE}")
_FLOAT = re.compile(rf"[+-]?(?:{_WHOLE}\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_FLOAT_WORDS = {"nan", "inf", "infinity", "+inf", "-inf", "+infinity", "-infinity"}


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


_DIGITS_APART = re.compile(r"\d\s+\d")


_ZERO_LED = re.compile(r"0\d+")


def comma_items(text: str, example: str) -> list[str]:
    """The items of a comma list, each stripped. An empty one (`1,,4`, `ttft=1,`) is refused:
    a slip that dropped a value should not pass as a shorter list; so is a space between
    digits (`1 4` is neither 14 nor 1 and 4)."""
    items = [item.strip() for item in text.split(",")]
    if any(items) and not all(items):
        raise ValueError(f"{text!r} has an empty item between commas: write it as {example}")
    spaced = next((item for item in items if _DIGITS_APART.search(item)), None)
    if spaced is not None:  # '1 4' read as 14 ran 14 users where 1 and 4 were meant
        raise ValueError(
            f"{text!r} has a space between digits in {spaced!r}: separate items with "
            f"commas, as {example}"
        )
    zero_led = next((item for item in items if _ZERO_LED.fullmatch(item)), None)
    if zero_led is not None:  # '4,096' had run lengths 4 and 96
        joined = text.replace(",", "").strip()
        advice = (
            f"write {joined}, not {text.strip()}"
            if joined.isascii() and joined.isdigit()
            else "write numbers without thousands commas (4096)"
        )
        raise ValueError(
            f"{text!r} holds {zero_led!r}, a number led by a zero: a comma separates items "
            f"here, so {advice}"
        )
    return [item for item in items if item]


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`1 request`, `2 requests`, `1,000 requests`: a count and its noun, in the right number."""
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"

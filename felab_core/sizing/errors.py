"""The one exception the sizing package raises, so callers catch one thing and show its message."""

from __future__ import annotations


class SizingError(ValueError):
    """Bad input for a sizing question: the message says what was wrong and what to do instead."""


class Unreachable(SizingError):
    """The server a sizing question reads (--url) could not be reached: exit code 3, not 2."""


class BadAnswer(Unreachable):
    """The server (--url) answered, but with figures no server of its kind reports (10^30
    seats, a negative length): the server's fault, so exit code 3 like an unreachable one."""

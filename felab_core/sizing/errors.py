"""The one exception the sizing package raises, so callers catch one thing and show its message."""

from __future__ import annotations

from felab_core.bounded_get import MAX_ANSWER_BYTES, WHOLE_ASK_S, Answer


class SizingError(ValueError):
    """Bad input for a sizing question: the message says what was wrong and what to do instead."""


class Unreachable(SizingError):
    """The server a sizing question reads (--url) could not be reached: exit code 3, not 2."""


class BadAnswer(Unreachable):
    """The server (--url) answered, but with figures no server of its kind reports (10^30
    seats, a negative length): the server's fault, so exit code 3 like an unreachable one."""


def answer_cut_off(url: str, answer: Answer) -> BadAnswer:
    """A server's answer felab stopped reading, past its size limit or its deadline: the
    server's fault (exit 3), not "not llama-server" or a parse error of the part that came."""
    why = (
        f"more than {MAX_ANSWER_BYTES // 2**20} MiB, where this answer is kilobytes"
        if len(answer.content) >= MAX_ANSWER_BYTES
        else f"still coming after the {WHOLE_ASK_S:g} s felab gives a server's answers"
    )
    return BadAnswer(
        f"{url} sent an answer felab stopped reading ({why}): check the server (busy, broken, "
        "or a proxy in between?)"
    )

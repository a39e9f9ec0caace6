"""Charts show outside words as they are: a model, host or file name with `$...$` in it
(`a$\\frac{b$`) is text, not matplotlib's mathtext, which had stopped `felab memo` (exit 70)
and would stop the trusted ingest drawing a machine's chart."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def words_as_written() -> Iterator[None]:
    """Draw (and save) inside this: no text is parsed as math."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        yield

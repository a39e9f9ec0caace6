"""A note when a long command has heard nothing for a while.

A server that takes the connection and never answers (a wrong port held by another program, a
server still loading its model) would otherwise look like a hang for the whole request timeout,
with nothing on screen when stderr is not a terminal (no progress bar is drawn there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType


class SilenceNotice:
    """Calls `say` once if `poke` has not been called for `after_s` seconds.

    Used as a context manager around the work; `poke` from wherever progress is reported.
    """

    def __init__(self, after_s: float, say: Callable[[float], None]) -> None:
        self._after_s = after_s
        self._say = say
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="silence-notice", daemon=True)

    def poke(self) -> None:
        self._last = time.monotonic()

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self._after_s / 4)):
            quiet = time.monotonic() - self._last
            if quiet >= self._after_s:
                self._say(quiet)
                return

    def __enter__(self) -> SilenceNotice:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


class ProgressLines:
    """Where no bar is drawn (stderr not a terminal: a log, CI, `2> file`), a line of progress
    at most every `every_s` seconds, fed by the bar's own callback: a long warm-up or a
    5,000-conversation run the person asked for had said nothing for minutes."""

    def __init__(self, every_s: float, say: Callable[[str], None]) -> None:
        self._every_s = every_s
        self._say = say
        self._last = time.monotonic()

    def update(self, what: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        if now - self._last < self._every_s:
            return
        self._last = now
        self._say(f"{what}: {done:,}{'' if total is None else f' of {total:,}'} done")

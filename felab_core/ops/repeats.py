"""One place for a warning that a sender can make felab repeat: said once, then counted.

A paired machine may push anything to the ingest's inbox: 100,000 junk messages had written
one warning each (100,032 lines, 16.7 MB of log), and the writing slowed the ingest that another
machine's honest result waited behind (sweep 24 M2). Each kind of refusal (its `key`) is now
said in full once, then as a count every EVERY_S seconds while it goes on ("dropped 12,345 more
messages ... in the last 30 s"); a kind quiet for a whole period is said in full again when it
comes back. At most MOST_KEYS kinds are told apart, so made-up values cannot make every line new.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

#: Seconds between two counts of the same refusal.
EVERY_S = 30.0
#: Kinds told apart at once; more are counted together.
MOST_KEYS = 64
_OTHERS = ("(other kinds)",)


@dataclass
class _Window:
    since: float
    count: int
    more: str  # the count's words: "dropped {n:,} more messages ..."


class Repeated:
    """Warnings on `log` said once a key, then counted (see the module's words)."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        every_s: float = EVERY_S,
        most_keys: int = MOST_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.every_s, self.most_keys, self.clock = log, every_s, most_keys, clock
        self._windows: dict[Hashable, _Window] = {}
        self._lock = threading.Lock()
        _ALL.append(self)

    def warn(self, key: Hashable, more: str, msg: str, *args: object) -> None:
        """Say `msg % args` unless `key` was said within the period; count it then. `more` is
        how a count is said, with `{n}` for it: "dropped {n:,} more messages ..."."""
        with self._lock:
            now = self.clock()
            counts = self._due(now)
            if key not in self._windows and len(self._windows) >= self.most_keys:
                key = _OTHERS
            window = self._windows.get(key)
            new = window is None
            if window is not None:
                window.count += 1
            else:
                self._windows[key] = _Window(now, 0, more)
        self._say(counts)  # outside the lock: a handler that warns again cannot deadlock
        if new:
            self.log.warning(msg, *args)

    def flush(self) -> None:
        """Say the counts whose period is over (a flood that stopped is counted too)."""
        with self._lock:
            counts = self._due(self.clock())
        self._say(counts)

    def _due(self, now: float) -> list[tuple[str, float]]:
        """The counts whose period is over, their windows started again (under the lock)."""
        counts = []
        for key, window in list(self._windows.items()):
            took = now - window.since
            if took < self.every_s:
                continue
            if window.count == 0:  # quiet a whole period: said in full when it comes back
                del self._windows[key]
                continue
            counts.append((window.more.format(n=window.count), took))
            self._windows[key] = _Window(now, 0, window.more)
        return counts

    def _say(self, counts: list[tuple[str, float]]) -> None:
        for words, took in counts:
            self.log.warning("%s in the last %.0f s", words, took)


_ALL: list[Repeated] = []


def flush_all() -> None:
    """Say every count that is due (the ingest does at each reconcile beat)."""
    for repeated in list(_ALL):
        repeated.flush()

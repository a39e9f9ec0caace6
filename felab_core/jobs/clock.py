"""One clock for the machines of a spread run: the broker's.

Each machine reads the broker's clock a few times and keeps the reading with the shortest round
trip (as NTP does): its offset is then known to within half that round trip. The shared start
of a spread run is written in the broker's clock, and each machine turns it into its own
monotonic clock, so machines whose wall clocks disagree still start together.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from felab_core.engine.client import now_ns

#: Readings taken; the best of a handful is within a millisecond on a LAN.
SAMPLES = 7


@dataclass(frozen=True)
class ClockOffset:
    """The broker's clock minus this machine's wall clock, good to +/- rtt_s / 2."""

    offset_s: float
    rtt_s: float

    def to_dict(self) -> dict[str, float]:
        return {"offset_s": self.offset_s, "rtt_s": self.rtt_s}


#: One machine (the embedded broker, or a test): the broker's clock is this one.
SAME_CLOCK = ClockOffset(0.0, 0.0)


def measure_offset(
    read_broker: Callable[[], float],
    *,
    samples: int = SAMPLES,
    wall: Callable[[], float] | None = None,
) -> ClockOffset:
    """Read the broker's clock `samples` times; the reading with the shortest trip wins."""
    wall = wall or time.time
    best: ClockOffset | None = None
    for _ in range(max(1, samples)):
        sent = wall()
        broker = read_broker()
        back = wall()
        reading = ClockOffset(broker - (sent + back) / 2, max(0.0, back - sent))
        if best is None or reading.rtt_s < best.rtt_s:
            best = reading
    assert best is not None
    return best


def local_start_ns(start_at: float, offset: ClockOffset, *, wall: float | None = None) -> int:
    """`start_at` (seconds on the broker's clock) on this process's monotonic clock."""
    here = start_at - offset.offset_s
    wall = time.time() if wall is None else wall
    return now_ns() + int((here - wall) * 1e9)

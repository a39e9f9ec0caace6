"""How one run is cut into slices of one schedule, so several client processes (or, later,
machines) together send exactly what one process would have sent.

Request i belongs to slice i mod N. An open-loop slice keeps the arrival times of its requests
unchanged, measured from a start time every slice shares; a closed-loop slice takes an even share
of the users and of the requests. Merging the slices' per-request records back (merge.py) then
gives the run one process would have measured, had it kept up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from felab_core.engine.client import now_ns

# One Python process reads 13-16k chunks/s as they arrive on a server CPU, and each added one
# ~10-12k (benchmarks/client_scaling.py; kernel stamps keep the figures right a little past
# that, but a loop behind sends its next requests late): the automatic choice stays under it.
CHUNKS_PER_PROCESS = 10_000.0


@dataclass(frozen=True, slots=True)
class Shard:
    """Slice `index` of `count`: the requests i with i % count == index."""

    index: int = 0
    count: int = 1
    # The start every slice shares, on CLOCK_MONOTONIC (one clock for all processes on a
    # machine); None starts now, as a single process always has.
    start_ns: int | None = None

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index} of {self.count}: need 0 <= index < count")

    def owns(self, i: int) -> bool:
        return i % self.count == self.index

    def global_index(self, j: int) -> int:
        """The run-wide index of this slice's j-th request."""
        return self.index + self.count * j

    def share(self, total: int) -> int:
        """This slice's part of `total` users or requests: even, the first slices one more."""
        return total // self.count + (1 if self.index < total % self.count else 0)

    def requests(self, total: int | None) -> int | None:
        return None if total is None else self.share(total)


#: A slice ready this long after the shared start would shift its arrivals: it is refused.
LATE_AFTER_S = 0.05


class LateStart(Exception):
    """This machine was ready only after the start its slice shares with the others."""


def check_on_time(shard: Shard) -> None:
    if shard.start_ns is None:
        return
    late_s = (now_ns() - shard.start_ns) / 1e9
    if late_s > LATE_AFTER_S:
        raise LateStart(
            f"slice {shard.index + 1} of {shard.count} was ready {late_s:.2f} s after the start "
            "the slices share (the machine took the job late, or its warm-up ran long), so it "
            "did not send: its arrivals would not be the run's"
        )


def slices(count: int, start_ns: int | None = None) -> list[Shard]:
    return [Shard(i, count, start_ns) for i in range(count)]


def usable_processes(asked: int, concurrency: int, requests: int | None, open_loop: bool) -> int:
    """No more processes than there are users (closed loop), slots (a capped open loop) or
    requests: a process with nothing to send only costs a start-up."""
    n = asked
    if concurrency > 0:  # closed loop's users, or an open loop's cap on requests in flight
        n = min(n, concurrency)
    if requests is not None:
        n = min(n, requests)
    if not open_loop and concurrency < 1:
        n = 1
    return max(1, n)


def auto_processes(chunks_per_s: float | None, free_cores: int) -> tuple[int, str]:
    """How many client processes a run needs, and why, in words for the output."""
    free_cores = max(1, free_cores)
    if chunks_per_s is None:
        return 1, "processes: 1 (auto: no warm-up stream to estimate the chunk rate from)"
    needed = max(1, math.ceil(chunks_per_s / CHUNKS_PER_PROCESS))
    n = min(needed, free_cores)
    why = (
        f"processes: {n} (auto: about {chunks_per_s:,.0f} chunks/s expected from the warm-up, "
        f"one process keeps up with ~{CHUNKS_PER_PROCESS:,.0f}"
    )
    if needed > free_cores:
        cores = "core is" if free_cores == 1 else "cores are"
        why += (
            f"; {needed} wanted but only {free_cores} {cores} free, so the client may lag: "
            "watch the client check"
        )
    return n, why + ")"

"""One run's figures from the per-request records of its slices (processes now, machines later).

Percentiles are computed again over the union of the records, never averaged: the p99 of two
halves' p99s is not the p99 of the run. A slice that is missing, or came back short, makes the
result `partial` with the reason; a smaller sample is never passed off as the whole run.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from felab_core.engine.metrics import SLO, RequestMetrics, RunSummary, summarize


@dataclass(slots=True)
class ShardRecords:
    """What one slice brought back: its requests, and its first send and last byte."""

    shard: int
    requests: list[RequestMetrics]
    started_ns: int  # on a clock every slice shares (CLOCK_MONOTONIC on one machine)
    ended_ns: int
    expected: int | None = None  # requests the slice was given, when the run had a count
    interrupted: bool = False


@dataclass(frozen=True, slots=True)
class ShardLoss:
    shard: int
    reason: str


@dataclass(slots=True)
class MergedRun:
    requests: list[RequestMetrics]  # every slice's, in schedule order
    summary: RunSummary
    shards: int
    lost: list[ShardLoss] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        return bool(self.lost)

    @property
    def partial_reason(self) -> str | None:
        if not self.lost:
            return None
        parts = "; ".join(f"slice {x.shard + 1} of {self.shards}: {x.reason}" for x in self.lost)
        return f"partial: {parts}"


def merge_shards(
    received: Sequence[ShardRecords],
    *,
    shards: int,
    lost: Mapping[int, str] | None = None,
    slo: SLO | None = None,
) -> MergedRun:
    """Merge the slices that came back; `lost` says why the others did not.

    Raises ValueError for records that cannot belong to one run (a slice twice, a slice
    outside 0..shards-1, one request index in two slices): that is a bug, not a lost slice.
    """
    lost = dict(lost or {})
    seen: dict[int, ShardRecords] = {}
    for rec in received:
        if not 0 <= rec.shard < shards:
            raise ValueError(f"slice {rec.shard} is outside the run's {shards} slices")
        if rec.shard in seen:
            raise ValueError(f"slice {rec.shard} came back twice")
        seen[rec.shard] = rec
    losses: list[ShardLoss] = []
    for i in range(shards):
        got = seen.get(i)
        if got is None:
            losses.append(ShardLoss(i, lost.get(i, "no records came back")))
        elif got.interrupted:
            losses.append(ShardLoss(i, f"interrupted after {len(got.requests)} requests"))
        elif got.expected is not None and len(got.requests) != got.expected:
            losses.append(ShardLoss(i, f"{len(got.requests)} of its {got.expected} requests"))
    requests = sorted((m for rec in seen.values() for m in rec.requests), key=lambda m: m.index)
    for a, b in itertools.pairwise(requests):
        if a.index == b.index:
            raise ValueError(f"request {a.index} is in two slices")
    if seen:
        start = min(rec.started_ns for rec in seen.values())
        end = max(rec.ended_ns for rec in seen.values())
        duration_s = max(0, end - start) / 1e9
    else:
        duration_s = 0.0
    summary = summarize(requests, duration_s=duration_s, slo=slo)
    return MergedRun(requests, summary, shards, losses)

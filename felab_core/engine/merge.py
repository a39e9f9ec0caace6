"""One run's figures from the per-request records of its slices (processes now, machines later).

Percentiles are computed again over the union of the records, never averaged: the p99 of two
halves' p99s is not the p99 of the run. A slice that is missing, or came back short, makes the
result `partial` with the reason; a smaller sample is never passed off as the whole run.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

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
    offered_s: float = 0.0,
) -> MergedRun:
    """Merge the slices that came back; `lost` says why the others did not.

    `offered_s`: how long the schedule offered requests (Workload.offered_window_s); the
    run's throughputs are counts over at least that long.

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
    summary = summarize(requests, duration_s=max(duration_s, offered_s), slo=slo)
    return MergedRun(requests, summary, shards, losses)


# What one request's figures weigh on the wire, for a slice that ran on another machine: every
# field the run's figures are computed from; inter-token gaps in whole microseconds.
_NOT_SENT = ("chunk_times_s", "server_timings", "itl_s")
_FIELDS = {f.name for f in fields(RequestMetrics)} - set(_NOT_SENT)


def request_to_wire(m: RequestMetrics) -> dict[str, Any]:
    out = {k: v for k, v in asdict(m).items() if k in _FIELDS}
    out["itl_us"] = [round(x * 1e6) for x in m.itl_s]
    return out


# Each field's kind, from its annotation: what a value from another machine must be.
_KINDS = {
    f.name: next(k for k in ("bool", "float", "int", "str", "") if k in str(f.type))
    for f in fields(RequestMetrics)
    if f.name in _FIELDS
}


def _fits(kind: str, value: Any) -> bool:
    if value is None:
        return kind != "bool"
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "float":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str) and len(value) <= 1000


def request_from_wire(data: Mapping[str, Any]) -> RequestMetrics:
    """A request as a slice reported it; ValueError for anything that is not one (a machine's
    figures are checked for type and finiteness before any percentile is taken of them)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("index"), int):
        raise ValueError("a request record without an index")
    kept = {k: v for k, v in data.items() if k in _FIELDS}
    for k, v in kept.items():
        if not _fits(_KINDS[k], v):
            raise ValueError(f"request {data['index']}: {k} is not a {_KINDS[k] or 'value'}")
    itl = data.get("itl_us") or []
    if not isinstance(itl, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 3_600_000_000 for x in itl
    ):
        raise ValueError(f"request {data['index']}: itl_us is not a list of microseconds")
    try:
        m = RequestMetrics(**kept)
    except TypeError as exc:
        raise ValueError(f"not a request record ({exc})") from None
    m.itl_s = [x / 1e6 for x in itl]
    return m

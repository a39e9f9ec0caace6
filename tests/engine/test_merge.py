"""Merging slices' records gives exactly the figures of the whole run, or says it is partial."""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from felab_core.engine.merge import ShardRecords, merge_shards
from felab_core.engine.metrics import SLO, RequestMetrics, summarize
from felab_core.engine.shards import Shard, auto_processes, slices, usable_processes

latency = st.floats(min_value=1e-5, max_value=30.0, allow_nan=False, allow_infinity=False)


@st.composite
def request_records(draw: st.DrawFn) -> list[RequestMetrics]:
    n = draw(st.integers(min_value=1, max_value=60))
    out = []
    for i in range(n):
        ok = draw(st.booleans()) if draw(st.integers(0, 9)) == 0 else True
        m = RequestMetrics(index=i, ok=ok, error=None if ok else "HTTP 500: boom")
        if ok:
            m.ttft_s = draw(latency)
            m.e2e_s = m.ttft_s + draw(latency)
            m.itl_s = draw(st.lists(latency, max_size=6))
            m.tpot_s = draw(st.none() | latency)
            m.writing_tps = None if m.tpot_s is None else 1 / m.tpot_s
            m.output_tokens = len(m.itl_s) + 1
            m.counted_chunks = m.output_tokens
            m.token_source = "usage"
        out.append(m)
    return out


def split(
    records: list[RequestMetrics], n: int, rng: random.Random, *, by_schedule: bool
) -> list[ShardRecords]:
    """Slices as processes (request i to slice i mod n) or machines (any partition) return them:
    each in its own order, each with its own start and end on the shared clock."""
    parts: list[list[RequestMetrics]] = [[] for _ in range(n)]
    for m in records:
        parts[m.index % n if by_schedule else rng.randrange(n)].append(copy.deepcopy(m))
    shards = []
    for i, part in enumerate(parts):
        rng.shuffle(part)
        shards.append(ShardRecords(i, part, started_ns=rng.randrange(1000), ended_ns=10**9 + i))
    return shards


@settings(max_examples=150, deadline=None)
@given(
    request_records(),
    st.integers(min_value=1, max_value=8),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_merged_figures_are_those_of_all_records(
    records: list[RequestMetrics], n: int, by_schedule: bool, rng: random.Random
) -> None:
    shards = split(records, n, rng, by_schedule=by_schedule)
    start = min(s.started_ns for s in shards)
    slo = SLO(ttft_s=5.0)
    whole = summarize(copy.deepcopy(records), duration_s=(10**9 + n - 1 - start) / 1e9, slo=slo)
    merged = merge_shards(shards, shards=n, slo=slo)
    assert not merged.partial and merged.partial_reason is None
    assert merged.summary == whole  # every Stats field: p50 ... p99, mean, max, count
    assert [m.index for m in merged.requests] == [m.index for m in records]


def test_a_percentile_of_the_union_is_not_an_average_of_percentiles() -> None:
    """The case an average would get wrong: one slow slice among fast ones."""
    fast = [RequestMetrics(index=i, ok=True, error=None, ttft_s=0.01) for i in range(0, 200, 2)]
    slow = [RequestMetrics(index=i, ok=True, error=None, ttft_s=1.0) for i in range(1, 200, 2)]
    slow[:95] = [dataclasses.replace(m, ttft_s=0.01) for m in slow[:95]]
    merged = merge_shards([ShardRecords(0, fast, 0, 1), ShardRecords(1, slow, 0, 1)], shards=2)
    assert merged.summary.ttft_s is not None
    assert merged.summary.ttft_s.p99 == pytest.approx(1.0)  # 5 of 200 are slow: above 1%
    per_slice = [summarize(copy.deepcopy(part), duration_s=1.0).ttft_s for part in (fast, slow)]
    average = sum(s.p99 for s in per_slice if s is not None) / 2
    assert average != pytest.approx(merged.summary.ttft_s.p99)


@settings(max_examples=80, deadline=None)
@given(
    request_records(),
    st.integers(min_value=2, max_value=6),
    st.randoms(use_true_random=False),
)
def test_a_lost_slice_makes_the_run_partial(
    records: list[RequestMetrics], n: int, rng: random.Random
) -> None:
    shards = split(records, n, rng, by_schedule=True)
    gone = rng.randrange(n)
    kept = [s for s in shards if s.shard != gone]
    merged = merge_shards(kept, shards=n, lost={gone: "the process was killed by SIGKILL"})
    assert merged.partial
    assert merged.partial_reason == (
        f"partial: slice {gone + 1} of {n}: the process was killed by SIGKILL"
    )
    assert merged.summary.ok + merged.summary.failed == sum(len(s.requests) for s in kept)
    # Lost without a word still counts as lost.
    assert merge_shards(kept, shards=n).lost[0].reason == "no records came back"


def test_a_short_or_interrupted_slice_makes_the_run_partial() -> None:
    recs = [RequestMetrics(index=i, ok=True, error=None, ttft_s=0.1) for i in range(4)]
    short = ShardRecords(0, recs[:1], 0, 1, expected=2)
    whole = ShardRecords(1, recs[1::2], 0, 1, expected=2)
    merged = merge_shards([short, whole], shards=2)
    assert merged.partial_reason == "partial: slice 1 of 2: 1 of its 2 requests"
    stopped = ShardRecords(0, recs[::2], 0, 1, expected=2, interrupted=True)
    assert merge_shards([stopped, whole], shards=2).partial


def test_records_that_cannot_be_one_run_are_refused() -> None:
    a = RequestMetrics(index=0, ok=True, error=None)
    with pytest.raises(ValueError, match="came back twice"):
        merge_shards([ShardRecords(0, [a], 0, 1), ShardRecords(0, [], 0, 1)], shards=2)
    with pytest.raises(ValueError, match="outside"):
        merge_shards([ShardRecords(2, [a], 0, 1)], shards=2)
    with pytest.raises(ValueError, match="in two slices"):
        merge_shards([ShardRecords(0, [a], 0, 1), ShardRecords(1, [a], 0, 1)], shards=2)


@given(st.integers(1, 9), st.integers(0, 500), st.integers(1, 300))
def test_slices_share_users_and_requests_evenly_and_completely(
    n: int, users: int, requests: int
) -> None:
    parts = slices(n)
    assert sum(s.share(users) for s in parts) == users
    assert max(s.share(users) for s in parts) - min(s.share(users) for s in parts) <= 1
    owned = sorted(s.global_index(j) for s in parts for j in range(s.requests(requests) or 0))
    assert owned == list(range(requests))
    assert all(parts[i % n].owns(i) for i in range(requests))


def test_the_automatic_choice_says_why() -> None:
    assert auto_processes(None, 8)[0] == 1
    assert auto_processes(5_000, 8)[0] == 1
    n, why = auto_processes(25_600, 8)  # 10,000 a process: three
    assert n == 3 and "25,600 chunks/s" in why
    n, why = auto_processes(100_000, 2)
    assert n == 2 and "only 2 cores are free" in why
    assert usable_processes(4, concurrency=2, requests=100, open_loop=False) == 2
    assert usable_processes(4, concurrency=0, requests=3, open_loop=True) == 3
    with pytest.raises(ValueError):
        Shard(2, 2)

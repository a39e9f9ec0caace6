"""One run spread over several machines (felab_core.jobs.spread), on SQLite and PostgreSQL.

Each slice runs the real engine against a real scripted server in its own thread, as two
machines would; their signed events go through the real ingest. The merged figures must be the
percentiles of every request the slices sent, never a blend of the slices' own; a slice that
failed, was late or reached another server makes the run `partial` and keeps it off the board.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.engine.merge import request_from_wire
from felab_core.engine.metrics import Stats
from felab_core.errors import Invalid
from felab_core.jobs.clock import ClockOffset, local_start_ns, measure_offset
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.lifecycle import TERMINAL
from felab_core.jobs.messages import JobMessage
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import cancel_job, deliveries, list_jobs
from felab_core.jobs.reconciler import reconcile
from felab_core.jobs.render import render_job
from felab_core.jobs.run import execute
from felab_core.jobs.spread import queue_spread_job, spread_workers
from felab_core.jobs.workload import Limits
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.settings import Settings

LIMITS = Limits(concurrency=8, requests=40, max_tokens=64, per_hour=10)
PARAMS = {"concurrency": 4, "requests": 12, "max_tokens": 8}
SETTINGS = Settings(spread_lead_s=3)


def _now() -> datetime:
    return datetime.now(UTC)


def _targets(tmp: Path, name: str, server: ScriptedServer) -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(f'[targets.mlx]\nurl = "http://127.0.0.1:{server.port}"\nmodel = "tiny"\n')
    return path


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    """Two scripted MLX servers: the same model (one server, as far as a slice can tell)."""
    script = Script(persona="mlx", ttft_s=0.02, itl_s=0.004, model="tiny")
    a = ScriptedServer(script).start_in_thread()
    b = ScriptedServer(script).start_in_thread()
    yield a, b
    a.stop_thread()
    b.stop_thread()


def _machines(db: Session, member: m.Member, n: int) -> list[tuple[Identity, m.Worker]]:
    out = []
    for i in range(n):
        key = new_private_key()
        code = issue_pair_code(db, member, f"mac{i + 1}", now=_now())
        w = redeem_pair_code(db, code, Identity(0, f"mac{i + 1}", key).public_key, now=_now())
        w.last_seen_at = _now()
        out.append((Identity(w.id, w.name, key), w))
    db.flush()
    return out


def _run_slices(
    msgs: list[JobMessage],
    targets: list[Path],
    fail: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[list[dict[str, Any]]]:
    """Each slice in its own thread, as on its own machine; the events each one sent."""
    events: list[list[dict[str, Any]]] = [[] for _ in msgs]

    def one(i: int) -> None:
        if i in fail:
            events[i].append(
                {
                    "worker_id": msgs[i].worker_id,
                    "kind": "failed",
                    "job_id": msgs[i].job_id,
                    "attempt": msgs[i].attempt,
                    "at": time.time(),
                    "body": {"reason": "the machine ran out of memory"},
                }
            )
            return
        execute(msgs[i], targets_file=targets[i], limits=LIMITS, emit=events[i].append)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(msgs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return events


def _ingest(db: Session, idents: list[Identity], events: list[list[dict[str, Any]]]) -> None:
    for ident, sent in zip(idents, events, strict=True):
        for ev in sent:
            ingest_event(db, ident.sign(ev), now=_now(), settings=SETTINGS)


def _exact(stats: dict[str, Any]) -> dict[str, Any]:
    """Percentiles compare exactly; a mean only to the last bit (sums in another order)."""
    return {k: pytest.approx(v, rel=1e-12) if k == "mean" else v for k, v in stats.items()}


def _spread(
    db: Session,
    student: m.Member,
    tmp_path: Path,
    servers: tuple[ScriptedServer, ...],
    tamper: Any = None,
    edit: Any = None,
    **kw: Any,
) -> tuple[m.BenchJob, list[m.BenchJob]]:
    machines = _machines(db, student, 2)
    queued = queue_spread_job(
        db, student, [w for _, w in machines], "mlx", "quick",
        params=PARAMS, now=_now(), settings=SETTINGS,
    )  # fmt: skip
    targets = [_targets(tmp_path, f"t{i}", s) for i, s in enumerate(servers)]
    events = _run_slices(queued.messages, targets, **kw)
    if tamper is not None:
        tamper(next(e for e in events[1] if e["kind"] == "result")["body"]["shard"])
    if edit is not None:  # each slice's events, before the ingest reads them
        edit(events)
    _ingest(db, [ident for ident, _ in machines], events)
    db.refresh(queued.job)
    return queued.job, queued.slices


def test_the_merged_run_is_the_percentiles_of_every_slices_requests(
    db: Session, student: m.Member, tmp_path: Path, servers: tuple[ScriptedServer, ...]
) -> None:
    parent, slices = _spread(db, student, tmp_path, servers)
    assert parent.status == "done", parent.error
    assert parent.error is None and [s.status for s in slices] == ["done", "done"]
    # Each slice sent its own share of one schedule: request i went to slice i % 2.
    union = []
    for part in slices:
        report = (part.record or {})["slice"]
        got = [request_from_wire(r) for r in report["requests"]]
        assert got and {q.index % 2 for q in got} == {part.shard_index}
        assert len(got) == 6 and report["clock"] == {"offset_s": 0.0, "rtt_s": 0.0}
        union.extend(got)
    assert sorted(q.index for q in union) == list(range(12))
    record = parent.record or {}
    run = record["runs"][0]
    assert [q["index"] for q in run["requests"]] == list(range(12))
    # Every percentile is that of the union of the records (never an average of the slices').
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        expected = Stats.of(getattr(q, name) for q in union if q.ok and not q.cold)
        assert expected is not None
        assert _exact(run["summary"][name]) == _exact(expected.to_json()), name
    itl = Stats.of(x for q in union if q.ok and not q.cold for x in q.itl_s)
    assert itl is not None and _exact(run["summary"]["itl_s"]) == _exact(itl.to_json())
    # One result, recorded once (not once a slice), under the run's own job.
    [result] = db.scalars(select(m.BenchResult).where(m.BenchResult.job_id == parent.id)).all()
    assert result.row["requests"] == "12" and result.row["host"] == "mac1 + mac2"
    ids = [s.id for s in slices]
    assert db.scalars(select(m.Number).where(m.Number.job_id.in_(ids))).all() == []
    assert db.scalars(select(m.JobOutbox.job_id)).all() == [parent.id]
    text = render_job(db, parent).text
    assert "spread over 2 machines (mac1, mac2)" in text and ": done" in text
    assert "Clocks against the broker's: mac1 +0.0 ms (±0.0), mac2 +0.0 ms (±0.0)" in text
    # The member's job list shows the run once, its machines and all its requests, no slices.
    [view] = list_jobs(db, student)
    assert view.job.id == parent.id and view.worker == "spread: mac1, mac2"
    assert view.progress == "12/12"


def test_a_failed_slice_makes_the_run_partial_not_a_smaller_whole(
    db: Session, student: m.Member, tmp_path: Path, servers: tuple[ScriptedServer, ...]
) -> None:
    parent, _ = _spread(db, student, tmp_path, servers, fail={1})
    assert parent.status == "done"
    assert parent.error == "partial: slice 2 of 2: failed: the machine ran out of memory"
    run = (parent.record or {})["runs"][0]
    assert len(run["requests"]) == 6 and run["partial"] == parent.error  # not a smaller "whole"
    # Several users at once: a result, not a single-user speed for the board; the post says
    # the run is partial and which slice is missing.
    [result] = db.scalars(select(m.BenchResult).where(m.BenchResult.job_id == parent.id)).all()
    assert result.row["requests"] == "6"
    text = render_job(db, parent).text
    assert "partial: slice 2 of 2: failed: the machine ran out of memory: these figures" in text


def test_a_slice_that_reached_another_server_is_left_out(
    db: Session, student: m.Member, tmp_path: Path
) -> None:
    a = ScriptedServer(
        Script(persona="mlx", ttft_s=0.02, itl_s=0.004, model="tiny")
    ).start_in_thread()
    b = ScriptedServer(
        Script(persona="mlx", ttft_s=0.02, itl_s=0.004, model="tiny-other")
    ).start_in_thread()
    try:
        parent, _ = _spread(db, student, tmp_path, (a, b))
    finally:
        a.stop_thread()
        b.stop_thread()
    assert parent.status == "done"
    assert parent.error is not None and "slice 2 of 2: it reached another server" in parent.error
    assert len((parent.record or {})["runs"][0]["requests"]) == 6


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda r: r["requests"][0].update(ttft_s="fast"), "ttft_s = 'fast', not a time"),
        (lambda r: r["requests"][0].update(e2e_s=float("nan")), "requests[0].e2e_s is nan, not a"),
        (lambda r: r["requests"][0].update(index=0), "request 0 is not this slice's"),
        (lambda r: r["requests"][0].update(itl_us=[-5]), "itl_us that is not a list of micro"),
        (lambda r: r.update(duration_s=-1), "slice 2 of 2 lasted -1 s, and job"),
        (lambda r: r["requests"].pop(), "lists 5 request(s) in its records, and its row says 6"),
    ],
)
def test_a_slice_with_records_that_are_not_a_slices_is_left_out(
    db: Session,
    student: m.Member,
    tmp_path: Path,
    servers: tuple[ScriptedServer, ...],
    change: Any,
    says: str,
) -> None:
    """A machine's figures are checked before any percentile is taken; a slice that sends
    fewer requests than it was given cannot pass for the whole run."""
    parent, _ = _spread(db, student, tmp_path, servers, tamper=change)
    assert parent.status == "done"
    assert parent.error is not None and parent.error.startswith("partial: slice 2 of 2: ")
    assert says in parent.error


def test_a_slice_ready_after_the_shared_start_does_not_send(
    db: Session, student: m.Member, tmp_path: Path, servers: tuple[ScriptedServer, ...]
) -> None:
    machines = _machines(db, student, 2)
    queued = queue_spread_job(
        db, student, [w for _, w in machines], "mlx", "quick",
        params=PARAMS, now=_now() - timedelta(seconds=10), settings=SETTINGS,
    )  # fmt: skip
    events: list[dict[str, Any]] = []
    target = _targets(tmp_path, "t", servers[0])
    execute(queued.messages[0], targets_file=target, limits=LIMITS, emit=events.append)
    assert [e["kind"] for e in events][-1] == "failed"
    assert "slice 1 of 2 was ready" in events[-1]["body"]["reason"]
    assert "after the start the slices share" in events[-1]["body"]["reason"]


def test_what_cannot_be_spread_is_refused_with_the_reason(db: Session, student: m.Member) -> None:
    (_, w1), (_, w2) = _machines(db, student, 2)
    cases = [
        ([w1], PARAMS, "2 to 16 machines, not 1"),
        ([w1, w1], PARAMS, "a different one"),
        ([w1, w2], {"requests": 1, "concurrency": 2}, "1 requests cannot be cut into 2"),
        ([w1, w2], {"requests": 8, "concurrency": 1}, "1 users cannot be cut into 2"),
    ]
    for workers, params, says in cases:
        with pytest.raises(Invalid, match=says):
            queue_spread_job(db, student, workers, "mlx", "quick", params=params, settings=SETTINGS)
    with pytest.raises(Invalid, match=r"needs 3 of your machines online .* you have 2"):
        spread_workers(db, student, "mlx", 3, settings=SETTINGS)
    assert [w.name for w in spread_workers(db, student, "mlx", 2)] == ["mac1", "mac2"]


def test_an_expired_slice_ends_the_run_and_a_cancel_reaches_every_slice(
    db: Session, student: m.Member
) -> None:
    (_, w1), (_, w2) = _machines(db, student, 2)
    now = _now()
    queued = queue_spread_job(
        db, student, [w1, w2], "mlx", "quick", params=PARAMS, now=now, settings=SETTINGS
    )
    # Nobody took either slice by the shared start: both expire, the run fails with why.
    reconcile(db, now=now + timedelta(seconds=5), settings=SETTINGS)
    db.refresh(queued.job)
    assert queued.job.status == "failed"
    assert queued.job.error is not None and "no slice of the run came back" in queued.job.error
    assert "slice 1: expired: it was not taken by the start the slices share" in queued.job.error
    again = queue_spread_job(
        db, student, [w1, w2], "mlx", "quick", params=PARAMS, now=now, settings=SETTINGS
    )
    with pytest.raises(Invalid, match="is a slice of job"):
        cancel_job(db, student, again.slices[0].id)
    cancel_job(db, student, again.job.id)
    assert [s.status for s in again.slices] == ["cancelled", "cancelled"]
    assert deliveries(db, again.job) == [(s.id, s.worker_id) for s in again.slices]


def test_the_broker_clock_is_read_from_the_shortest_round_trip() -> None:
    walls = iter([10.0, 10.2, 20.0, 20.01, 30.0, 30.5])
    brokers = iter([110.15, 120.004, 130.3])
    got = measure_offset(lambda: next(brokers), samples=3, wall=lambda: next(walls))
    assert got.rtt_s == pytest.approx(0.01) and got.offset_s == pytest.approx(99.999)
    # A start 2 s ahead on the broker's clock is 2 s ahead here, whatever the offset.
    ahead = local_start_ns(1000.0 + 99.999 + 2, ClockOffset(99.999, 0.01), wall=1000.0)
    assert 1.99e9 < ahead - time.monotonic_ns() < 2.01e9


def test_a_slice_s_bad_row_fails_that_slice_not_the_honest_one(
    db: Session, student: m.Member, tmp_path: Path, servers: tuple[ScriptedServer, ...]
) -> None:
    """Seventeenth sweep (b) H13: a slice row with an escape code in its model was kept; the
    honest slice's result then failed the merge, was refused every time (blamed on the honest
    machine), and the run never ended."""

    def escape_in_first_slice(events: list[list[dict[str, Any]]]) -> None:
        result = next(e for e in events[0] if e["kind"] == "result")
        result["body"]["rows"][0]["model"] += "\x1b[31m"

    run, (bad, honest) = _spread(db, student, tmp_path, servers, edit=escape_in_first_slice)
    assert bad.status == "failed" and "control characters" in (bad.error or "")
    assert honest.status == "done"
    assert run.status in TERMINAL  # the run ended, with the honest slice's requests

"""`felab worker jobs | cancel | allow-instructors`: thin commands over felab_core.jobs, on an
embedded SQLite (and the embedded broker's claims file), as the instructor's side runs them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db import models as m
from felab_core.db.session import default_sessions, session_scope
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import new_private_key, public_key_text, sign
from felab_core.jobs.messages import event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.people.members import add_member, create_cohort
from felab_core.settings import get_settings

runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("FELAB_DATABASE_URL", "FELAB_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "250")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def felab(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["worker", *args])
    return result.exit_code, result.output


def _signed(
    key: Ed25519PrivateKey,
    worker_id: int,
    kind: str,
    job: m.BenchJob,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return sign(event(worker_id, kind, job_id=job.id, attempt=job.attempt, body=body), key)


@dataclass
class Fleet:
    cohort: int
    worker: int
    key: Ed25519PrivateKey
    queued: int
    running: int
    failed: int

    def who(self, discord_id: str = "100") -> list[str]:
        return ["--member", discord_id, "--cohort", str(self.cohort)]

    def job(self, job_id: int) -> m.BenchJob:
        with session_scope(default_sessions()) as s:
            job = s.get(m.BenchJob, job_id)
            assert job is not None
            return job


@pytest.fixture
def fleet() -> Fleet:
    """Cohort C: Ada (student, owns ada-mac) and Ines (instructor); three jobs on ada-mac."""
    with session_scope(default_sessions()) as s:
        cohort = create_cohort(
            s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9), guild_id="g"
        )
        ada = add_member(s, cohort, "100", display_name="Ada")
        add_member(s, cohort, "200", role="instructor", display_name="Ines")
        key = new_private_key()
        worker = redeem_pair_code(s, issue_pair_code(s, ada, "ada-mac"), public_key_text(key))
        queued = queue_bench_job(s, ada, worker, "mlx", "quick").job
        running = queue_bench_job(s, ada, worker, "mlx", "quick").job
        ingest_event(s, _signed(key, worker.id, "started", running))
        ingest_event(s, _signed(key, worker.id, "progress", running, {"done": 1, "total": 3}))
        failed = queue_bench_job(s, ada, worker, "llamacpp", "quick").job
        reason = "connection refused: nothing listens at 127.0.0.1:8081"
        ingest_event(s, _signed(key, worker.id, "failed", failed, {"reason": reason}))
        return Fleet(cohort.id, worker.id, key, queued.id, running.id, failed.id)


def test_jobs_lists_status_progress_and_reason(fleet: Fleet) -> None:
    code, out = felab("jobs", *fleet.who())
    assert code == 0, out
    lines = {int(line.split()[1]): line for line in out.splitlines() if "ada-mac" in line}
    assert set(lines) == {fleet.queued, fleet.running, fleet.failed}
    assert "queued" in lines[fleet.queued]
    assert "running" in lines[fleet.running] and "1/3" in lines[fleet.running]
    assert "failed" in lines[fleet.failed]
    assert "connection refused: nothing listens at 127.0.0.1:8081" in lines[fleet.failed]
    code, out = felab("jobs", *fleet.who("200"))  # Ines asked for none of them
    assert code == 0 and "no jobs yet" in out


def test_cancel_queued_and_running_jobs(fleet: Fleet, tmp_path: Path) -> None:
    import json

    from felab_worker.broker import broker_url, make_store
    from felab_worker.names import Names

    settings = get_settings()
    store, names = make_store(broker_url(settings), settings), Names(settings.broker_prefix)
    queued_attempt = fleet.job(fleet.queued).attempt or ""
    claim = names.claim_key(fleet.worker, fleet.queued)
    store.set(claim, queued_attempt, 60)
    code, out = felab("cancel", str(fleet.queued), *fleet.who())
    assert code == 0, out
    assert f"job {fleet.queued} cancelled" in out
    assert fleet.job(fleet.queued).status == "cancelled"
    assert store.claim(claim, queued_attempt) == "stale"  # the worker drops it

    running = fleet.job(fleet.running)
    code, out = felab("cancel", str(fleet.running), *fleet.who())
    assert code == 0, out
    assert "its machine stops the run within seconds" in out
    # Both cancels wait on the machine's control list, which its worker reads.
    control = names.control_key(fleet.worker)
    got = [json.loads(store.pop(control, 0.1) or "null") for _ in range(3)]
    assert got == [
        {"cancel": {"job_id": fleet.queued}},
        {"cancel": {"job_id": fleet.running}},
        None,
    ]
    # The run's later result is dropped: nothing is recorded for a cancelled job.
    with session_scope(default_sessions()) as s:
        late = ingest_event(
            s,
            _signed(fleet.key, fleet.worker, "result", running, {"rows": [{"server": "mlx"}]}),
        )
        assert not late.accepted and "already cancelled" in late.reason
        assert s.query(m.Number).count() == 0
    assert fleet.job(fleet.running).status == "cancelled"

    code, out = felab("cancel", str(fleet.failed), *fleet.who())
    assert code == 2 and "already failed" in out
    code, out = felab("cancel", str(fleet.failed + 1000), *fleet.who())
    assert code == 2 and "no job" in out


def test_cancel_by_someone_else_is_refused(fleet: Fleet) -> None:
    code, out = felab("cancel", str(fleet.queued), *fleet.who("200"))
    assert code == 2 and "only who asked for the job" in out
    assert fleet.job(fleet.queued).status == "queued"


def test_allow_instructors_is_the_owners_choice(fleet: Fleet) -> None:
    def allowed() -> bool:
        with session_scope(default_sessions()) as s:
            w = s.get(m.Worker, fleet.worker)
            assert w is not None
            return w.allow_instructors

    assert not allowed()
    code, out = felab("allow-instructors", "ada-mac", "--yes", *fleet.who())
    assert code == 0 and "instructors may now run jobs on ada-mac" in out
    assert allowed()
    code, out = felab("allow-instructors", "ada-mac", "--yes", *fleet.who("200"))
    assert code == 2 and "only the machine's owner" in out
    code, out = felab("allow-instructors", "ada-mac", "--no", *fleet.who())
    assert code == 0 and "only you may run jobs on ada-mac" in out
    assert not allowed()
    code, out = felab("allow-instructors", "nope", "--no", *fleet.who())
    assert code == 2 and "no worker named 'nope'" in out


def test_run_queues_on_one_machine_or_spreads_over_several(fleet: Fleet) -> None:
    from felab_worker.broker import broker_url, make_store
    from felab_worker.names import Names

    running = fleet.job(fleet.running)
    with session_scope(default_sessions()) as s:
        ada = s.get(m.Worker, fleet.worker)
        assert ada is not None
        member = s.get(m.Member, ada.member_id)
        assert member is not None
        key = new_private_key()
        box = redeem_pair_code(s, issue_pair_code(s, member, "ada-box"), public_key_text(key))
        ingest_event(s, sign(event(box.id, "heartbeat", body={"seq": 1}), key))
        ingest_event(s, _signed(fleet.key, fleet.worker, "progress", running))  # ada-mac is up
    code, out = felab("run", "mlx", *fleet.who())
    assert code == 2 and "several machines (ada-box, ada-mac): pick one with --on" in out
    code, out = felab("run", "mlx", "--on", "ada-mac", *fleet.who())
    assert code == 0 and ": mlx on ada-mac: queued" in out, out
    code, out = felab(
        "run", "mlx", "--spread", "2", "--concurrency", "2", "--requests", "4", *fleet.who()
    )
    assert code == 0 and ": mlx spread over ada-box, ada-mac: queued" in out, out
    settings = get_settings()
    store, names = make_store(broker_url(settings), settings), Names(settings.broker_prefix)
    with session_scope(default_sessions()) as s:
        parts = s.query(m.BenchJob).filter(m.BenchJob.spread_of.is_not(None)).all()
        assert sorted(p.shard_index or 0 for p in parts) == [0, 1]
        for p in parts:  # each slice's message went to its own machine, its attempt to claim
            assert p.worker_id is not None
            assert store.get(names.claim_key(p.worker_id, p.id)) == p.attempt
    code, out = felab("run", "mlx", "--spread", "3", *fleet.who())
    assert code == 2 and "you have 2 (ada-box, ada-mac)" in out


def test_run_with_the_broker_down_keeps_the_job_queued_and_says_so(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job row is committed before the publish: a broker that does not answer leaves it
    queued for the reconciler, said in words with exit 3 (it crashed on the committed session)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("FELAB_BROKER_URL", f"redis://u:hunter2@127.0.0.1:{closed}/0")
    get_settings.cache_clear()
    code, out = felab("run", "mlx", *fleet.who())
    assert code == 3, out
    assert "stays queued" in out and "hunter2" not in out
    with session_scope(default_sessions()) as s:
        newest = s.query(m.BenchJob).order_by(m.BenchJob.id.desc()).first()
        assert newest is not None and newest.status == "queued" and newest.target == "mlx"


@pytest.mark.parametrize("how", ["pairing user", "wrong type"])
def test_status_tells_a_broker_that_refused_from_one_not_reached(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str
) -> None:
    """Thirteenth sweep M6: with the pairing URL (no LLEN allowed) or a queue key of the wrong
    type, `felab status` said "broker: not reached" (exit 3) of a broker it had reached."""
    from felab_core.jobs.pairing import secret_hash
    from felab_worker import acl
    from felab_worker.names import Names
    from tests.e2e.fleet import PREFIX, RedisServer

    broker = RedisServer(tmp_path)
    try:
        admin = broker.client()
        url = broker.url
        if how == "pairing user":
            acl.ensure_users(admin, Names(PREFIX), secret_hash("pairing-pw-1"), [])
            url = f"redis://{Names(PREFIX).pairing_user}:pairing-pw-1@127.0.0.1:{broker.port}/0"
        else:
            admin.set(f"{PREFIX}host.{fleet.worker}.jobs", "not a queue")
        monkeypatch.setenv("FELAB_BROKER_URL", url)
        monkeypatch.setenv("FELAB_BROKER_PREFIX", PREFIX)
        get_settings.cache_clear()
        result = runner.invoke(app, ["status"])
    finally:
        broker.stop()
    out = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "broker: reached, but" in out and "not reached" not in out
    said = "felab's admin user" if how == "pairing user" else "Redis said WRONGTYPE"
    assert said in out and "pairing-pw-1" not in out

"""The worker fleet end to end: a real Redis with a user per machine, real `celery worker`
processes (`felab worker`), a scripted streaming server, results landing in PostgreSQL through
the ingest."""

from __future__ import annotations

import os
import signal
import time as _time
import uuid
from collections.abc import Iterator
from datetime import date, time
from pathlib import Path

import pytest
from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.queueing import queue_bench_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.members import add_member, create_cohort
from felab_worker.dispatch import Dispatcher
from tests.e2e.fleet import Fleet, fleet_fixture, free_port, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.01, itl_s=0.002)).start_in_thread()
    yield f"http://127.0.0.1:{srv.port}"
    srv.stop_thread()


@pytest.fixture(scope="module")
def slow_server() -> Iterator[str]:
    srv = ScriptedServer(
        Script(persona="mlx", ttft_s=0.05, itl_s=0.1, default_max_tokens=16)
    ).start_in_thread()
    yield f"http://127.0.0.1:{srv.port}"
    srv.stop_thread()


@pytest.fixture(scope="module")
def people(fleet: Fleet) -> dict[str, m.Member]:
    with session_scope(fleet.sessions) as s:
        cohort = create_cohort(
            s,
            "Fleet",
            timezone="UTC",
            start_date=date(2026, 3, 2),
            post_time=time(9, 0),
            guild_id=f"g{uuid.uuid4().hex[:8]}",
            channel_id="c",
        )
        return {
            "ada": add_member(s, cohort, "1", display_name="Ada"),
            "bob": add_member(s, cohort, "2", display_name="Bob"),
        }


@pytest.fixture(scope="module")
def started(fleet: Fleet) -> Fleet:
    fleet.start_ingest()
    return fleet


def _queue(fleet: Fleet, member: m.Member, worker_id: int, target: str = "mlx", **params: int):
    dispatcher = Dispatcher(fleet.settings())
    with session_scope(fleet.sessions) as s:
        worker = s.get(m.Worker, worker_id)
        assert worker is not None
        q = queue_bench_job(
            s,
            s.merge(member),
            worker,
            target,
            "quick",
            params=params,
            send=dispatcher.send,
            settings=fleet.settings(),
        )
        return q.job.id, q.notice


def _done(fleet: Fleet, job_id: int, statuses: tuple[str, ...] = ("done", "failed", "expired")):
    job = fleet.job(job_id)
    return job if job.status in statuses else None


def test_job_runs_on_its_own_worker_and_lands_in_postgres(
    started: Fleet, people: dict[str, m.Member], server: str, tmp_path: Path
) -> None:
    fleet = started
    dead = f"http://127.0.0.1:{free_port()}"
    env_a = fleet.student_env("ada-mac", {"mlx": server})
    env_b = fleet.student_env("bob-mac", {"mlx": dead})
    wa = fleet.pair(people["ada"], "ada-mac", env_a)
    wb = fleet.pair(people["bob"], "bob-mac", env_b)
    fleet.start_student("ada-mac", env_a)
    fleet.start_student("bob-mac", env_b)
    wait_for(lambda: fleet.job_worker_online(wa) and fleet.job_worker_online(wb), 30, "online")

    job_id, notice = _queue(fleet, people["ada"], wa)
    assert notice == ""
    job = wait_for(lambda: _done(fleet, job_id), 30, "the job to finish")
    assert job.status == "done", job.error
    assert job.progress_done == job.progress_total == 3
    assert job.chart_png and job.chart_png.startswith(b"\x89PNG")
    # What a result carries: target names, never the URL or the machine's host name.
    assert job.record and "url" not in job.record["target"] and job.record["host"] == ""
    assert server not in repr(job.record)
    with session_scope(fleet.sessions) as s:
        result = s.scalars(select(m.BenchResult).where(m.BenchResult.job_id == job_id)).one()
        assert result.server == "mlx" and result.writing_tps_p50
        assert result.row["host"] == "ada-mac"  # the machine's name as its owner chose it
        number = s.scalars(select(m.Number).where(m.Number.job_id == job_id)).one()
        assert number.member_id == people["ada"].id and number.source == "measured"
        assert s.scalars(select(m.JobOutbox).where(m.JobOutbox.job_id == job_id)).one()

    # Bob's machine has nothing listening where its targets file says: the reason says so.
    job_b, _ = _queue(fleet, people["bob"], wb)
    job = wait_for(lambda: _done(fleet, job_b), 30, "the refused job to fail")
    assert job.status == "failed" and "connection refused" in (job.error or "")


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def _running(fleet: Fleet, job_id: int) -> m.BenchJob | None:
    job = fleet.job(job_id)
    return job if job.status == "running" and job.progress_done >= 1 else None


def test_killed_pool_child_is_run_again_not_lost(
    started: Fleet, people: dict[str, m.Member], slow_server: str
) -> None:
    fleet = started
    env = fleet.student_env("ada-child", {"mlx": slow_server})
    wid = fleet.pair(people["ada"], "ada-child", env)
    proc = fleet.start_student("ada-child", env)
    wait_for(lambda: fleet.job_worker_online(wid), 30, "online")
    job_id, _ = _queue(fleet, people["ada"], wid, max_tokens=8)
    wait_for(lambda: _running(fleet, job_id), 30, "the job to run")
    (child,) = _children(proc.popen.pid)
    os.kill(child, signal.SIGKILL)
    job = wait_for(lambda: _done(fleet, job_id), 60, "the job to be run again")
    assert job.status == "done", job.error
    assert job.attempts == 2  # the redelivery of attempt 1 was reported, not run twice


def test_killed_worker_is_noticed_and_its_job_run_after_restart(
    started: Fleet, people: dict[str, m.Member], slow_server: str
) -> None:
    fleet = started
    env = fleet.student_env("ada-kill", {"mlx": slow_server})
    wid = fleet.pair(people["ada"], "ada-kill", env)
    proc = fleet.start_student("ada-kill", env)
    wait_for(lambda: fleet.job_worker_online(wid), 30, "online")
    job_id, _ = _queue(fleet, people["ada"], wid, max_tokens=8)
    wait_for(lambda: _running(fleet, job_id), 30, "the job to run")
    proc.kill()  # main process and pool child, SIGKILL to the whole group
    # Offline after 3 s, the reconciler beats every 0.5 s: back to queued with the reason.
    job = wait_for(
        lambda: _done(fleet, job_id, ("queued", "failed")), 15, "the lost run to be noticed"
    )
    assert job.status == "queued" and "stopped heartbeating" in (job.error or "")
    fleet.start_student("ada-kill", env)
    job = wait_for(lambda: _done(fleet, job_id), 60, "the job to run on the restarted worker")
    assert job.status == "done", job.error
    assert job.attempts == 2


def test_someone_elses_worker_and_forged_results_are_refused(
    started: Fleet, people: dict[str, m.Member], server: str
) -> None:
    from felab_core.errors import Forbidden
    from felab_core.jobs.keys import new_private_key, sign
    from felab_core.jobs.messages import event
    from felab_worker.names import INGEST_QUEUE

    fleet = started
    env = fleet.student_env("bob-forge", {"mlx": server})
    wid = fleet.pair(people["bob"], "bob-forge", env)
    with pytest.raises(Forbidden):
        _queue(fleet, people["ada"], wid)  # Ada may not use Bob's machine
    # Bob's job, queued while his worker is offline: it says so at once.
    job_id, notice = _queue(fleet, people["bob"], wid)
    assert "offline" in notice
    # A result for it signed by a key that is not the worker's: refused by the ingest.
    forged = sign(
        event(
            wid,
            "result",
            job_id=job_id,
            attempt=fleet.job(job_id).attempt,
            body={
                "rows": [
                    {
                        "server": "mlx",
                        "model": "x",
                        "preset": "quick",
                        "concurrency": "1",
                        "writing_tps_p50": "9999",
                    }
                ]
            },
        ),
        new_private_key(),
    )
    Dispatcher(fleet.settings()).app.send_task("felab.ingest", args=[forged], queue=INGEST_QUEUE)
    assert fleet.ingest is not None
    wait_for(lambda: "signature does not match" in fleet.ingest.text(), 10, "the refusal")  # type: ignore[union-attr]
    assert fleet.job(job_id).status == "queued"


def _kill_child(proc_pid: int) -> None:
    (child,) = _children(proc_pid)
    os.kill(child, signal.SIGKILL)


def _running_attempt(fleet: Fleet, job_id: int, attempts: int) -> m.BenchJob | None:
    job = _running(fleet, job_id)
    return job if job is not None and job.attempts == attempts else None


def test_kill_9_with_attempts_used_up_fails_the_job_with_the_reason(
    started: Fleet, people: dict[str, m.Member], slow_server: str
) -> None:
    """FELAB_JOB_MAX_ATTEMPTS=2: the second lost run fails the job, with why, in bounded time."""
    fleet = started
    env = fleet.student_env("ada-doomed", {"mlx": slow_server})
    wid = fleet.pair(people["ada"], "ada-doomed", env)
    proc = fleet.start_student("ada-doomed", env)
    wait_for(lambda: fleet.job_worker_online(wid), 30, "online")

    # The pool child killed twice: the worker reports each lost run; the second one fails it.
    job_id, _ = _queue(fleet, people["ada"], wid, max_tokens=16)
    wait_for(lambda: _running_attempt(fleet, job_id, 1), 30, "attempt 1 to run")
    _kill_child(proc.popen.pid)
    wait_for(lambda: _running_attempt(fleet, job_id, 2), 30, "attempt 2 to run")
    _kill_child(proc.popen.pid)
    job = wait_for(lambda: _done(fleet, job_id), 15, "the job to fail")
    assert job.status == "failed" and job.attempts == 2
    assert job.error is not None
    assert "worker process running the job died" in job.error
    assert "tried 2 times" in job.error and "given up" in job.error

    # The whole worker killed (-9, main process and child) on the last attempt: offline after
    # 3 s, the reconciler beats every 0.5 s, so the job fails within seconds, not never.
    job_id, _ = _queue(fleet, people["ada"], wid, max_tokens=16)
    wait_for(lambda: _running_attempt(fleet, job_id, 1), 30, "attempt 1 to run")
    _kill_child(proc.popen.pid)
    wait_for(lambda: _running_attempt(fleet, job_id, 2), 30, "attempt 2 to run")
    proc.kill()
    t0 = _time.monotonic()
    job = wait_for(lambda: _done(fleet, job_id), 15, "the job to fail")
    took = _time.monotonic() - t0
    assert job.status == "failed" and job.attempts == 2
    assert job.error is not None
    assert "ada-doomed stopped heartbeating while running it" in job.error
    assert "given up" in job.error
    assert took < 3 + 5  # FELAB_WORKER_OFFLINE_AFTER_S plus a few reconciler beats


def test_hard_and_soft_time_limits_fail_the_job_with_the_reason(
    started: Fleet, people: dict[str, m.Member], slow_server: str
) -> None:
    """Small limits via settings: the hard limit (no soft margin) kills the run and the worker's
    main process reports it; the soft limit lets the job report it itself. Neither runs again."""
    fleet = started
    hard_env = fleet.student_env("ada-hard", {"mlx": slow_server})
    hard_env |= {"FELAB_JOB_TIME_LIMIT_S": "2", "FELAB_JOB_SOFT_MARGIN_S": "0"}
    soft_env = fleet.student_env("ada-soft", {"mlx": slow_server})
    soft_env |= {"FELAB_JOB_TIME_LIMIT_S": "4", "FELAB_JOB_SOFT_MARGIN_S": "2.5"}
    hard = fleet.pair(people["ada"], "ada-hard", hard_env)
    soft = fleet.pair(people["ada"], "ada-soft", soft_env)
    fleet.start_student("ada-hard", hard_env)
    fleet.start_student("ada-soft", soft_env)
    wait_for(lambda: fleet.job_worker_online(hard) and fleet.job_worker_online(soft), 30, "online")
    # 3 requests of 32 tokens at 10 tokens/s: ~10 s, far past either limit.
    hard_job, _ = _queue(fleet, people["ada"], hard, max_tokens=32)
    soft_job, _ = _queue(fleet, people["ada"], soft, max_tokens=32)
    t0 = _time.monotonic()
    job = wait_for(lambda: _done(fleet, hard_job), 15, "the hard limit to end the job")
    assert _time.monotonic() - t0 < 8
    assert job.status == "failed" and job.attempts == 1
    assert "hard time limit (2 s" in (job.error or "")
    job = wait_for(lambda: _done(fleet, soft_job), 15, "the soft limit to end the job")
    assert job.status == "failed" and job.attempts == 1
    assert "ran past its time limit (1.5 s)" in (job.error or "")
    _time.sleep(1.5)  # a redelivery would show up as a second attempt or a changed status
    assert fleet.job(hard_job).status == "failed" and fleet.job(hard_job).attempts == 1


def _targets_of(fleet: Fleet, worker_id: int) -> dict[str, str] | None:
    with session_scope(fleet.sessions) as s:
        w = s.get(m.Worker, worker_id)
        assert w is not None
        return w.targets


def test_a_worker_reports_its_targets_and_a_missing_one_is_refused_at_queue_time(
    started: Fleet, people: dict[str, m.Member], server: str
) -> None:
    import subprocess

    from felab_core.errors import Invalid
    from tests.e2e.fleet import FELAB, ROOT

    fleet = started
    env = fleet.student_env("ada-targets", {"mlx": server})
    tf = Path(env["FELAB_TARGETS_FILE"])
    secret = "http://10.9.8.7:8000"
    tf.write_text(tf.read_text() + f'[targets.gpu]\nkind = "vllm"\nurl = "{secret}"\n')
    wid = fleet.pair(people["ada"], "ada-targets", env)
    reported = _targets_of(fleet, wid)  # sent with the pairing request
    assert reported is not None and reported["gpu"] == "vllm" and reported["mlx"] == "mlx"
    # The file is edited, then the worker starts: its heartbeats carry the new list.
    tf.write_text(tf.read_text() + '[targets.box]\nkind = "openai"\nurl = "http://10.9.8.6:1"\n')
    fleet.start_student("ada-targets", env)
    wait_for(lambda: "box" in (_targets_of(fleet, wid) or {}), 30, "the heartbeat's targets")
    stored = _targets_of(fleet, wid)
    assert stored is not None and stored["box"] == "openai"
    assert "10.9.8" not in repr(stored)  # names and kinds only: URLs stay on the machine

    with session_scope(fleet.sessions) as s:
        before = s.scalars(select(m.BenchJob).where(m.BenchJob.worker_id == wid)).all()
    with pytest.raises(Invalid) as refused:
        _queue(fleet, people["ada"], wid, "box2")
    assert "your machine ada-targets has no target box2; it has: box, gpu" in str(refused.value)
    with session_scope(fleet.sessions) as s:
        after = s.scalars(select(m.BenchJob).where(m.BenchJob.worker_id == wid)).all()
    assert len(after) == len(before)  # refused before any row or message

    job_id, _ = _queue(fleet, people["ada"], wid, "mlx")
    job = wait_for(lambda: _done(fleet, job_id), 30, "the mlx job to finish")
    assert job.status == "done", job.error

    out = subprocess.run(
        [FELAB, "worker", "list", "--member", "1", "--cohort", str(people["ada"].cohort_id)],
        env={**fleet.ingest_env(), "COLUMNS": "250"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if "ada-targets" in x)
    assert "box, gpu" in line and "10.9.8" not in out.stdout

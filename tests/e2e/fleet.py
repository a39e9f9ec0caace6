"""Real-process fixtures for the worker fleet: a Redis key prefix per session, a PostgreSQL
schema, the ingest and student workers as `felab worker` subprocesses in their own process
groups, always killed at teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.jobs.pairing import issue_pair_code
from felab_core.settings import Settings
from tests.db_support import new_pg_schema_url

ROOT = Path(__file__).resolve().parents[2]
FELAB = str(Path(sys.executable).with_name("felab"))
REDIS_URL = os.environ.get("FELAB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

FAST = {
    "FELAB_WORKER_HEARTBEAT_S": "0.5",
    "FELAB_WORKER_OFFLINE_AFTER_S": "3",
    "FELAB_RECONCILE_EVERY_S": "0.5",
    "FELAB_JOB_RESEND_AFTER_S": "3",
    "FELAB_JOB_MAX_ATTEMPTS": "2",
}


def redis_or_skip(url: str = REDIS_URL) -> None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception:
        pytest.skip(
            "Redis is not answering on 127.0.0.1:6379: start it with `redis-server --daemonize "
            'yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no`'
        )


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def spawn(args: list[str], env: dict[str, str], log: Path) -> Proc:
    fh = log.open("ab")
    p = subprocess.Popen(
        args, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT
    )
    return Proc(p, log)


def wait_for(pred: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@dataclass
class Fleet:
    """One broker prefix, one database, one ingest; student workers on demand."""

    tmp: Path
    broker_env: dict[str, str]
    db_url: str
    sessions: sessionmaker[Session]
    ingest: Proc | None = None
    procs: list[Proc] = field(default_factory=list)

    def settings(self, **extra: Any) -> Settings:
        env = {k.removeprefix("FELAB_").lower(): v for k, v in {**FAST, **self.broker_env}.items()}
        return Settings(**{**env, "data_dir": self.tmp / "bot", **extra})

    def ingest_env(self) -> dict[str, str]:
        return {
            **base_env(),
            **FAST,
            **self.broker_env,
            "FELAB_DATABASE_URL": self.db_url,
            "FELAB_DATA_DIR": str(self.tmp / "ingest"),
        }

    def start_ingest(self) -> Proc:
        self.ingest = spawn(
            [FELAB, "worker", "ingest", "--loglevel", "INFO"],
            self.ingest_env(),
            self.tmp / "ingest.log",
        )
        self.procs.append(self.ingest)
        return self.ingest

    def student_env(self, name: str, targets: dict[str, str]) -> dict[str, str]:
        home = self.tmp / f"student-{name}"
        home.mkdir(exist_ok=True)
        tf = home / "targets.toml"
        tf.write_text(
            "".join(f'[targets.{t}]\nurl = "{url}"\nmodel = "tiny"\n' for t, url in targets.items())
        )
        env = {
            **base_env(),
            **FAST,
            **self.broker_env,
            "FELAB_DATA_DIR": str(home),
            "FELAB_TARGETS_FILE": str(tf),
        }
        assert "FELAB_DATABASE_URL" not in env  # a student worker never holds the database
        return env

    def pair(self, member: m.Member, name: str, env: dict[str, str], **kw: Any) -> int:
        with session_scope(self.sessions) as s:
            code = issue_pair_code(s, s.merge(member), name, **kw)
        out = subprocess.run(
            [FELAB, "worker", "pair", "--code", code, "--timeout", "20"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert out.returncode == 0, out.stderr + out.stdout
        with session_scope(self.sessions) as s:
            w = s.query(m.Worker).filter_by(member_id=member.id, name=name).one()
            return w.id

    def start_student(self, name: str, env: dict[str, str], pool: str = "prefork") -> Proc:
        p = spawn(
            [FELAB, "worker", "start", "--name", name, "--pool", pool],
            env,
            self.tmp / f"student-{name}.log",
        )
        self.procs.append(p)
        return p

    def job(self, job_id: int) -> m.BenchJob:
        with session_scope(self.sessions) as s:
            job = s.get(m.BenchJob, job_id)
            assert job is not None
            return job

    def job_worker_online(self, worker_id: int) -> bool:
        with session_scope(self.sessions) as s:
            w = s.get(m.Worker, worker_id)
            return w is not None and w.last_seen_at is not None

    def close(self) -> None:
        for p in self.procs:
            p.kill()


def fleet_fixture(tmp: Path, broker_env: dict[str, str]) -> Iterator[Fleet]:
    url, drop = new_pg_schema_url()
    engine = make_engine(url)
    upgrade(engine)
    fleet = Fleet(tmp, broker_env, url, session_factory(engine))
    try:
        yield fleet
    finally:
        fleet.close()
        engine.dispose()
        drop()


def new_prefix() -> str:
    return f"felabtest-{uuid.uuid4().hex[:10]}:"


def drop_prefix(url: str, prefix: str) -> None:
    import redis

    r = redis.Redis.from_url(url)
    for key in r.scan_iter(f"{prefix}*"):
        r.delete(key)

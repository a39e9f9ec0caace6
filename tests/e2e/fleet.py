"""Real-process fixtures for the worker fleet: a redis-server of the test's own (per-machine ACL
users need one), a PostgreSQL schema, the ingest and student workers as `felab worker`
subprocesses in their own process groups, always killed at teardown.

The trusted side (the ingest, the dispatcher) uses the Redis user `admin`; the default user is
off, as in production. A student's machine gets only the pairing URL `felab broker setup`
prints, and after pairing only its own user, exactly what a cohort member would hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
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
PREFIX = "felab:"

FAST = {
    "FELAB_LOG_LEVEL": "INFO",
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


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


class RedisServer:
    """redis-server on a free port, stopped by its PID: the default user off, `admin` the
    trusted side's user; TLS only (`rediss://`) when asked."""

    def __init__(self, tmp: Path, *, tls: bool = False) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("needs redis-server (apt-get install redis-server)")
        if tls and shutil.which("openssl") is None:
            pytest.skip("needs openssl for a TLS redis-server")
        self.tmp, self.port, self.tls = tmp, free_port(), tls
        self.password = secrets.token_hex(12)
        self.cert: Path | None = None
        lines = ["bind 127.0.0.1", 'save ""', "appendonly no", f"dir {tmp}"]
        if tls:
            self.cert, key = tmp / "cert.pem", tmp / "key.pem"
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                 "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                 "-keyout", str(key), "-out", str(self.cert)],
                check=True, capture_output=True, timeout=60,
            )  # fmt: skip
            lines += [
                "port 0",
                f"tls-port {self.port}",
                f"tls-cert-file {self.cert}",
                f"tls-key-file {key}",
                f"tls-ca-cert-file {self.cert}",
                "tls-auth-clients no",
            ]
        else:
            lines.append(f"port {self.port}")
        lines += ["user default off", f"user admin on >{self.password} ~* &* +@all"]
        self.conf = tmp / "redis.conf"
        self.conf.write_text("\n".join(lines) + "\n")
        self.proc: Proc | None = None
        self.start()

    @property
    def scheme(self) -> str:
        return "rediss" if self.tls else "redis"

    @property
    def url(self) -> str:
        """The trusted side's URL (the `admin` user)."""
        return f"{self.scheme}://admin:{self.password}@127.0.0.1:{self.port}/0"

    def env(self) -> dict[str, str]:
        """The trusted side's broker settings."""
        env = {"FELAB_BROKER_URL": self.url, "FELAB_BROKER_PREFIX": PREFIX}
        if self.cert is not None:
            env["FELAB_BROKER_CA_FILE"] = str(self.cert)
        return env

    def client(self, url: str | None = None) -> Any:
        import redis

        kw: dict[str, Any] = {"socket_timeout": 10, "decode_responses": True}
        if self.cert is not None:
            kw |= {"ssl_ca_certs": str(self.cert), "ssl_cert_reqs": "required"}
        return redis.Redis.from_url(url or self.url, **kw)

    def denied(self, user: str | None = None) -> list[str]:
        """The commands, keys and channels Redis refused (ACL LOG), of one user or of everyone;
        failed logins (a user the restarted server does not know yet) are not counted."""
        return [
            f"{e.get('username')} {e.get('reason')}: {e.get('object')}"
            for e in self.client().acl_log(count=1000)
            if (user is None or e.get("username") == user) and e.get("reason") != "auth"
        ]

    def start(self) -> None:
        self.proc = spawn(["redis-server", str(self.conf)], {}, self.tmp / "redis.log")
        wait_for(self._ping, 15, "the redis-server to answer")

    def _ping(self) -> bool:
        try:
            return bool(self.client().ping())
        except Exception:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        """Stop and start again: Redis keeps nothing on disk, its ACL users included."""
        self.stop()
        time.sleep(down_s)
        self.start()


@dataclass
class Fleet:
    """One broker, one database, one ingest; student machines on demand."""

    tmp: Path
    redis: RedisServer
    db_url: str
    sessions: sessionmaker[Session]
    ingest: Proc | None = None
    procs: list[Proc] = field(default_factory=list)
    _pairing_url: str | None = None

    @property
    def broker_env(self) -> dict[str, str]:
        return self.redis.env()

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

    def start_ingest(self, **extra: str) -> Proc:
        self.ingest = spawn(
            [FELAB, "worker", "ingest", "--loglevel", "INFO"],
            {**self.ingest_env(), **extra},
            self.tmp / "ingest.log",
        )
        self.procs.append(self.ingest)
        return self.ingest

    def pairing_url(self) -> str:
        """What an instructor hands the cohort: `felab broker setup --json`'s pairing_url."""
        if self._pairing_url is None:
            out = subprocess.run(
                [FELAB, "broker", "setup", "--json"],
                env=self.ingest_env(),
                capture_output=True,
                text=True,
                timeout=60,
                cwd=ROOT,
            )
            assert out.returncode == 0, out.stderr + out.stdout
            self._pairing_url = str(json.loads(out.stdout)["pairing_url"])
        return self._pairing_url

    def student_env(self, name: str, targets: dict[str, str]) -> dict[str, str]:
        """A student's machine: its own folder and targets file, and only the pairing URL."""
        home = self.tmp / f"student-{name}"
        home.mkdir(exist_ok=True)
        tf = home / "targets.toml"
        tf.write_text(
            "".join(f'[targets.{t}]\nurl = "{url}"\nmodel = "tiny"\n' for t, url in targets.items())
        )
        env = {
            **base_env(),
            **FAST,
            "FELAB_BROKER_URL": self.pairing_url(),
            "FELAB_BROKER_PREFIX": PREFIX,
            "FELAB_DATA_DIR": str(home),
            "FELAB_TARGETS_FILE": str(tf),
        }
        if self.redis.cert is not None:
            env["FELAB_BROKER_CA_FILE"] = str(self.redis.cert)
        assert "FELAB_DATABASE_URL" not in env  # a student worker never holds the database
        return env

    def code(self, member: m.Member, name: str, **kw: Any) -> str:
        with session_scope(self.sessions) as s:
            return issue_pair_code(s, s.merge(member), name, **kw)

    def pair(self, member: m.Member, name: str, env: dict[str, str], **kw: Any) -> int:
        out = self.redeem(self.code(member, name, **kw), env)
        assert out.returncode == 0, out.stderr + out.stdout
        with session_scope(self.sessions) as s:
            w = s.query(m.Worker).filter_by(member_id=member.id, name=name).one()
            return w.id

    @staticmethod
    def redeem(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FELAB, "worker", "pair", "--code", code, "--timeout", "20"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )

    @staticmethod
    def own_url(name: str, env: dict[str, str]) -> str:
        """The machine's own broker URL, as `felab worker identity` tells its owner."""
        out = subprocess.run(
            [FELAB, "worker", "identity", "--name", name, "--json", "--show-password"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert out.returncode == 0, out.stderr
        return str(json.loads(out.stdout)["broker_url"])

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


def fleet_fixture(tmp: Path, *, tls: bool = False) -> Iterator[Fleet]:
    (tmp / "redis").mkdir()
    redis = RedisServer(tmp / "redis", tls=tls)
    url, drop = new_pg_schema_url()
    engine = make_engine(url)
    upgrade(engine)
    fleet = Fleet(tmp, redis, url, session_factory(engine))
    try:
        yield fleet
    finally:
        fleet.close()
        redis.stop()
        engine.dispose()
        drop()


class TcpProxy:
    """A TCP relay the test can cut and restore: PostgreSQL going away under a running process,
    then coming back (the server itself keeps serving everyone else)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        import threading

        self.target = (target_host, target_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.restore()

    def _accept(self, server: socket.socket) -> None:
        import threading

        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def cut(self) -> None:
        """Refuse new connections and drop every open one."""
        if self._server is not None:
            with contextlib.suppress(OSError):  # wakes the thread blocked in accept()
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        with self._lock:
            for s in self._conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
            self._conns.clear()

    def restore(self) -> None:
        import threading

        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def url_for(self, url: str) -> str:
        """`url` (a database URL on the target) through this proxy."""
        from sqlalchemy.engine import make_url

        return (
            make_url(url)
            .set(host="127.0.0.1", port=self.port)
            .render_as_string(hide_password=False)
        )

"""A broker with a password, an ACL user and TLS only (`rediss://`), restarted while jobs are
queued: nothing is lost, because the database, not the broker, holds the jobs."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from datetime import date, time
from pathlib import Path

import pytest

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.queueing import queue_bench_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.service import add_member, create_cohort
from felab_worker.dispatch import Dispatcher
from tests.e2e.fleet import Fleet, fleet_fixture, spawn, wait_for
from tests.e2e.test_worker_fleet import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
PASSWORD = "s3cret-" + uuid.uuid4().hex[:8]
# What felab's processes need, and no more (README "Worker fleet" prints the same rule): its
# own key prefix and pub/sub channels (FELAB_BROKER_PREFIX, default `felab:`), kombu's queue
# commands, Celery's result backend (pairing answers), the attempt claims (a Lua script).
FELAB_ACL = (
    "resetkeys ~felab:* resetchannels &felab:* -@all "
    "+ping +hello +select "
    "+lpush +brpop +rpop +llen +exists +pexpire +sadd +smembers +srem +del "
    "+get +mget +set +setex +expire +hset +hget +hdel +zadd +zrem +zrange "
    "+multi +exec +discard +watch +unwatch +eval +evalsha +script|load "
    "+publish +subscribe +unsubscribe"
)


class SecureRedis:
    """redis-server on a free port: TLS only, the default user off, user `felab` with a password."""

    def __init__(self, tmp: Path) -> None:
        if shutil.which("redis-server") is None or shutil.which("openssl") is None:
            pytest.skip("needs redis-server and openssl (apt-get install redis-server openssl)")
        self.tmp, self.port = tmp, free_port()
        self.cert, key = tmp / "cert.pem", tmp / "key.pem"
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
                str(key),
                "-out",
                str(self.cert),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.conf = tmp / "redis.conf"
        self.conf.write_text(
            f"port 0\ntls-port {self.port}\nbind 127.0.0.1\ntls-cert-file {self.cert}\n"
            f"tls-key-file {key}\ntls-ca-cert-file {self.cert}\ntls-auth-clients no\n"
            f'save ""\nappendonly no\ndir {tmp}\n'
            f"user default off\nuser felab on >{PASSWORD} {FELAB_ACL}\n"
            f"user admin on >{PASSWORD}-admin ~* &* +@all\n"
        )
        self.proc = None
        self.start()

    @property
    def url(self) -> str:
        return f"rediss://felab:{PASSWORD}@127.0.0.1:{self.port}/0"

    def client(self, url: str | None = None):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis.from_url(
            url or self.url, ssl_ca_certs=str(self.cert), ssl_cert_reqs="required"
        )

    def admin(self):  # type: ignore[no-untyped-def]
        """The test's own view (ACL LOG, every key); felab's processes never use it."""
        port = self.port
        return self.client(f"rediss://admin:{PASSWORD}-admin@127.0.0.1:{port}/0")

    def denied(self) -> list[str]:
        """What the `felab` user was refused since the server started (ACL LOG)."""
        return [
            f"{e.get('reason')}: {e.get('object')}"
            for e in self.admin().acl_log()
            if e.get("username") == "felab"
        ]

    def start(self) -> None:
        self.proc = spawn(["redis-server", str(self.conf)], {}, self.tmp / "redis.log")
        wait_for(self._ping, 15, "the TLS redis-server to answer")

    def _ping(self) -> bool:
        try:
            return bool(self.client().ping())
        except Exception:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureRedis]:
    r = SecureRedis(tmp_path_factory.mktemp("redis"))
    yield r
    r.stop()


@pytest.fixture(scope="module")
def fleet(secure: SecureRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    env = {"FELAB_BROKER_URL": secure.url, "FELAB_BROKER_CA_FILE": str(secure.cert)}
    yield from fleet_fixture(tmp_path_factory.mktemp("fleet"), env)


def test_the_acl_user_is_needed_and_kept_to_felabs_keys(secure: SecureRedis) -> None:
    import redis

    with pytest.raises(redis.exceptions.AuthenticationError):
        secure.client(f"rediss://127.0.0.1:{secure.port}/0").set("x", "1")
    with pytest.raises(redis.exceptions.ConnectionError):  # plain text is not spoken at all
        redis.Redis(port=secure.port, socket_timeout=2).ping()
    felab = secure.client()
    felab.set("felab:probe", "1")
    felab.delete("felab:probe")
    for refused in (
        lambda: felab.set("another-app:x", "1"),  # keys outside the prefix
        lambda: felab.get("another-app:x"),
        lambda: felab.keys("*"),
        lambda: felab.flushall(),
        lambda: felab.config_get("*"),
        lambda: felab.publish("another-app:ch", "x"),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()
    assert len(secure.denied()) >= 5  # the ACL LOG the next test reads sees these
    secure.admin().acl_log_reset()


def test_jobs_survive_a_broker_restart_over_tls(fleet: Fleet, secure: SecureRedis) -> None:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.01, itl_s=0.002)).start_in_thread()
    try:
        with session_scope(fleet.sessions) as s:
            cohort = create_cohort(
                s,
                "TLS",
                timezone="UTC",
                start_date=date(2026, 3, 2),
                post_time=time(9, 0),
                guild_id=f"g{uuid.uuid4().hex[:8]}",
                channel_id="c",
            )
            ada = add_member(s, cohort, "1")
        fleet.start_ingest()
        env = fleet.student_env("tls-mac", {"mlx": f"http://127.0.0.1:{srv.port}"})
        wid = fleet.pair(ada, "tls-mac", env)
        dispatcher = Dispatcher(fleet.settings())
        ids = []
        with session_scope(fleet.sessions) as s:
            worker = s.get(m.Worker, wid)
            assert worker is not None
            for _ in range(2):
                q = queue_bench_job(
                    s,
                    s.merge(ada),
                    worker,
                    "mlx",
                    "quick",
                    send=dispatcher.send,
                    settings=fleet.settings(),
                )
                ids.append(q.job.id)
        prefix = fleet.settings().broker_prefix
        assert secure.client().llen(f"{prefix}felab.host.{wid}") == 2
        secure.stop()  # keeps nothing on disk: both messages and their attempts are gone
        secure.start()
        # (the ingest may already have reconnected and bound its own queue again)
        assert secure.admin().llen(f"{prefix}felab.host.{wid}") == 0
        assert not list(secure.admin().scan_iter(f"{prefix}attempt:*"))
        fleet.start_student("tls-mac", env)
        for job_id in ids:
            job = wait_for(
                lambda j=job_id: (
                    fleet.job(j).status in ("done", "failed", "expired") and fleet.job(j)
                ),
                60,
                f"job {job_id} to finish after the restart",
            )
            assert job.status == "done", job.error
            assert job.attempts >= 2  # sent again after the restart
        # Pairing, queueing, claims, heartbeats, results: nothing felab did was refused.
        assert secure.denied() == []
        assert all(k.startswith(prefix.encode()) for k in secure.admin().scan_iter("*"))
    finally:
        srv.stop_thread()

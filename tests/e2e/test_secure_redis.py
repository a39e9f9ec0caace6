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
from felab_core.jobs.service import queue_bench_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.service import add_member, create_cohort
from tests.e2e.fleet import Fleet, fleet_fixture, spawn, wait_for
from tests.e2e.test_worker_fleet import free_port
from worker.dispatch import Dispatcher

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
PASSWORD = "s3cret-" + uuid.uuid4().hex[:8]


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
            f"user default off\nuser felab on >{PASSWORD} ~* &* +@all\n"
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


def test_the_acl_user_is_needed(secure: SecureRedis) -> None:
    import redis

    with pytest.raises(redis.exceptions.AuthenticationError):
        secure.client(f"rediss://127.0.0.1:{secure.port}/0").set("x", "1")
    with pytest.raises(redis.exceptions.ConnectionError):  # plain text is not spoken at all
        redis.Redis(port=secure.port, socket_timeout=2).ping()


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
        assert secure.client().llen(f"{fleet.settings().broker_prefix}felab.host.{wid}") == 2
        secure.stop()  # keeps nothing on disk: both messages and their attempts are gone
        secure.start()
        assert secure.client().dbsize() == 0
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
    finally:
        srv.stop_thread()

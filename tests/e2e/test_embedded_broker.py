"""The embedded default, no servers at all: kombu's SQLAlchemy broker on a SQLite file, the
SQLite database, real `felab worker ingest` and `felab worker start` processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from felab_core.db import models as m
from felab_core.db.session import default_sessions, session_scope
from felab_core.db.types import utcnow
from felab_core.jobs.pairing import issue_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.members import ensure_local_member
from felab_core.settings import Settings
from felab_worker.dispatch import Dispatcher
from tests.e2e.fleet import FELAB, ROOT, base_env, spawn, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_a_job_runs_with_no_broker_server(tmp_path: Path) -> None:
    srv = ScriptedServer(Script(persona="mlx")).start_in_thread()
    procs = []
    try:
        (tmp_path / "t.toml").write_text(f'[targets.mlx]\nurl = "http://127.0.0.1:{srv.port}"\n')
        env = {
            **base_env(),
            "FELAB_DATA_DIR": str(tmp_path),
            "FELAB_TARGETS_FILE": str(tmp_path / "t.toml"),
            "FELAB_WORKER_HEARTBEAT_S": "0.5",
        }
        settings = Settings(data_dir=tmp_path)
        sessions = default_sessions(settings.resolved_database_url())
        with session_scope(sessions) as s:
            me = ensure_local_member(s, now=utcnow())
            code = issue_pair_code(s, me, "mac")
        procs.append(spawn([FELAB, "worker", "ingest"], env, tmp_path / "ingest.log"))
        out = subprocess.run(
            [FELAB, "worker", "pair", "--code", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert out.returncode == 0, out.stderr
        procs.append(spawn([FELAB, "worker", "start", "--name", "mac"], env, tmp_path / "w.log"))
        with session_scope(sessions) as s:
            worker = s.query(m.Worker).one()
            job_id = queue_bench_job(
                s, s.merge(me), worker, "mlx", "quick", send=Dispatcher(settings).send
            ).job.id

        def finished() -> m.BenchJob | None:
            with session_scope(sessions) as s:
                job = s.get(m.BenchJob, job_id)
                assert job is not None
                return job if job.status not in ("queued", "running") else None

        job = wait_for(finished, 60, "the job to finish")
        assert job.status == "done", job.error
    finally:
        for p in procs:
            p.kill()
        srv.stop_thread()

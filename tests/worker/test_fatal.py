"""A Celery worker's fatal error ends the command in one line with a non-zero exit, for the
ingest as for a machine (thirteenth sweep: a broker queue key holding a string made `felab worker
ingest` print Celery's traceback and exit 0). Real redis-server, real `felab` processes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from felab_worker.fatal import broker_fault
from tests.e2e.fleet import FELAB, PREFIX, RedisServer, base_env


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)  # on a free port, stopped by its PID
    yield server
    server.stop()


@pytest.mark.slow
def test_an_inbox_of_the_wrong_kind_stops_the_ingest_in_one_line(
    broker: RedisServer, tmp_path: Path
) -> None:
    broker.client().set(f"{PREFIX}ingest.inbox", "not a queue")  # another program's key
    env = {**base_env(), **broker.env(), "FELAB_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [FELAB, "worker", "ingest"], env=env, capture_output=True, text=True, timeout=60
    )
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "Traceback" not in out and "Unrecoverable error" not in out
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "a queue on the broker holds another kind of value (Redis said WRONGTYPE)" in errors[0]
    assert f"FELAB_BROKER_PREFIX ({PREFIX!r})" in errors[0]
    assert broker.password not in out


def test_only_a_wrong_type_is_called_a_broker_fault() -> None:
    import redis

    wrong = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind")
    assert broker_fault(wrong, "felab:") is not None
    assert broker_fault(redis.ResponseError("ERR unknown command"), "felab:") is None

"""A machine's broker address that answers, but not as Redis does (eighteenth sweep, b H6):
`felab worker start` ended "a bug in felab" (exit 70) on Celery's AttributeError or
RecursionError. It now says the broker answered as no Redis does, exit 3, in one line: at its
login check, or, when the broker turns strange after it, once Celery stops."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from felab_core.jobs.keys import Identity, new_private_key
from tests.e2e.fleet import FELAB, PREFIX, base_env
from tests.worker.fake_broker import Answer, fake_broker, handshake_or

WRONG = b"+OK\r\n:-999999999999999999999999\r\n$-5\r\n*99999999999\r\n"
DEEP = b"*1\r\n" * 100_000 + b":1\r\n"


def _answering(reply: bytes, *, first_is_redis: bool) -> Answer:
    """Every command answered with `reply`; with `first_is_redis`, the first connection (felab's
    login check) is answered PONG, as Redis would, and only Celery's meet `reply`."""

    def answer(args: list[bytes], conn: int) -> bytes:
        return b"+PONG\r\n" if first_is_redis and conn == 0 and args[0] == b"PING" else reply

    return handshake_or(answer)


@pytest.mark.slow
@pytest.mark.parametrize("first_is_redis", [False, True], ids=["at-login", "under-celery"])
@pytest.mark.parametrize("reply", [WRONG, DEEP], ids=["wrong-resp", "nested"])
def test_a_broker_that_answers_as_no_redis_does_is_said_exit_3(
    tmp_path: Path, reply: bytes, first_is_redis: bool
) -> None:
    with fake_broker(_answering(reply, first_is_redis=first_is_redis)) as url:
        own = url.replace("redis://", "redis://felab-machine.1:pw@")
        key_file = tmp_path / "worker-box.json"
        Identity(1, "box", new_private_key(), broker_url=own).save(key_file)
        env = {
            **base_env(),
            "FELAB_DATA_DIR": str(tmp_path / "data"),
            "FELAB_WORKER_KEY_FILE": str(key_file),
            "FELAB_BROKER_PREFIX": PREFIX,
        }
        done = subprocess.run(
            [FELAB, "worker", "start", "--name", "box", "--pool", "solo"],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    assert "Traceback" not in out and "bug in felab" not in out
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    assert "answered, but not as Redis does" in errors[0] and ":pw@" not in out
    assert json.loads(key_file.read_text())["worker_id"] == 1  # the identity is kept

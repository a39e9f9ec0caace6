"""A machine's identity file and `felab worker start` (eleventh sweep).

An identity edited by hand (worker_id -1, true or "1"; broker_url null or http://) was shown by
`worker identity` and reached Celery, which printed a traceback and exited 0, ran quietly on
the embedded broker, or ended in "unexpected error". A removed machine (or a wrong password)
was retried by Celery forever. Real files, a real redis-server of the test's own, the real
`felab` command; no mocks.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.jobs.pairing import MachineCredential, secret_hash
from felab_core.settings import get_settings
from felab_worker import acl
from felab_worker.names import Names
from tests.e2e.fleet import FELAB, PREFIX, RedisServer, base_env, free_port
from tests.worker.processes import kill_group, start_felab, wait_in

runner = CliRunner()
PASSWORD = "machine-pw-5ecret"


def _key() -> str:
    raw = Ed25519PrivateKey.generate().private_bytes(
        Encoding.Raw, PrivateFormat.Raw, NoEncryption()
    )
    return base64.b64encode(raw).decode()


def _identity(url: str | None = None, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"worker_id": 1, "name": "box", "private_key": _key()}
    if url is not None:
        data["broker_url"] = url
    return {**data, **fields}


def _write_private(path: Path, text: str) -> None:
    """An identity file as pairing leaves it: its owner's alone (felab refuses one others can
    read)."""
    path.write_text(text)
    path.chmod(0o600)


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for var in ("FELAB_DATABASE_URL", "FELAB_BROKER_URL", "FELAB_BROKER_PREFIX", "FELAB_DEBUG"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "worker-box.json"
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FELAB_WORKER_KEY_FILE", str(path))
    monkeypatch.setenv("COLUMNS", "250")  # click's usage box, one line a message
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()


GOOD_URL = f"redis://felab-machine.1:{PASSWORD}@127.0.0.1:1/0"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"worker_id": -1}, "worker_id is -1: a worker's id is 1 or more"),
        ({"worker_id": 0}, "worker_id is 0"),
        ({"worker_id": True}, "worker_id is true, not a whole number"),
        ({"worker_id": "1"}, 'worker_id is "1", not a whole number'),
        ({"worker_id": 1.5}, "worker_id is 1.5"),
        ({"worker_id": None}, "worker_id is null"),
        ({"worker_id": "abc"}, 'worker_id is "abc"'),  # Identity.load's int() failed in silence
        ({"name": 7}, "name is 7, not text"),
        ({"private_key": "short"}, "private_key is not an Ed25519 private key"),
        ({"private_key": 5}, "private_key is not an Ed25519 private key"),
        ({"broker_url": None}, "broker_url is null"),
        ({"broker_url": f"http://x:{PASSWORD}@127.0.0.1:1/0"}, "broker_url is a 'http' URL"),
        ({"broker_url": 5}, "broker_url is 5"),
        ({"broker_url": "redis://127.0.0.1:1/0"}, "lacks this machine's user, password"),
        ({"broker_url": f"redis:///x:{PASSWORD}@h"}, "lacks this machine's user, password"),
        ({"broker_url": f"redis://felab-machine.1:{PASSWORD}@h:x/0"}, "port is not a number"),
        ({"broker_url": f"redis://felab-machine.7:{PASSWORD}@h:1/0"}, "'felab-machine.7'"),
        # thirteenth sweep: ?ssl=true reached kombu (exit 70); /99 read as a removed machine
        ({"broker_url": f"redis://felab-machine.1:{PASSWORD}@h:1/0?ssl=true"}, "after ? or #"),
        ({"broker_url": f"redis://felab-machine.1:{PASSWORD}@h:1/0#x"}, "after ? or #"),
        ({"broker_url": f"redis://felab-machine.1:{PASSWORD}@h:1/99"}, "other than 0"),
        # seventeenth sweep (b) L1: a pasted ESC[31m in the password was "the port"
        ({"broker_url": f"redis://felab-machine.1:\x1b[31m{PASSWORD}@h:1/0"}, "control or"),
        ({"broker_url": f"redis://felab-machine.1:[31m{PASSWORD}@h:1/0"}, "a '[' that no ']'"),
    ],
)
def test_a_field_of_the_wrong_type_or_range_is_refused_by_name(
    key_file: Path, fields: dict[str, Any], says: str
) -> None:
    _write_private(key_file, json.dumps(_identity(GOOD_URL, **fields)))
    for command in (["identity"], ["start", "--pool", "solo"]):
        result = runner.invoke(app, ["worker", *command, "--name", "box"])
        assert result.exit_code == 2, result.output
        assert "is not a felab worker identity" in result.output
        assert says in result.output
        assert "felab worker pair --code CODE" in result.output
        assert PASSWORD not in result.output
        assert not key_file.with_name("worker-box.state").exists()


def test_json_nested_thousands_deep_is_refused_not_crashed(key_file: Path) -> None:
    _write_private(key_file, "[" * 30_000 + "]" * 30_000)
    result = runner.invoke(app, ["worker", "identity", "--name", "box"])
    assert result.exit_code == 2, result.output
    assert "is not a felab worker identity" in result.output


def test_what_pairing_writes_is_accepted(key_file: Path) -> None:
    """With its own Redis URL, and without one (paired on the embedded broker)."""
    _write_private(key_file, json.dumps(_identity(GOOD_URL)))
    result = runner.invoke(app, ["worker", "identity", "--name", "box", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["worker_id"] == 1
    _write_private(key_file, json.dumps(_identity()))
    result = runner.invoke(app, ["worker", "identity", "--name", "box"])
    assert result.exit_code == 0, result.output
    assert "sqla+sqlite" in result.output


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_an_identity_others_can_read_is_refused_with_the_chmod(key_file: Path, mode: int) -> None:
    """A seventeenth-sweep low: a world-readable identity (its private key and broker password)
    was used without a word; like ssh, felab asks for the owner's alone."""
    _write_private(key_file, json.dumps(_identity(GOOD_URL)))
    key_file.chmod(mode)
    result = runner.invoke(app, ["worker", "identity", "--name", "box"])
    assert result.exit_code == 2, result.output
    assert f"(mode {mode:o})" in result.output and f"chmod 600 {key_file}" in result.output
    assert PASSWORD not in result.output


@pytest.mark.parametrize("pool", ["gevent", "", "eventlet"])
def test_a_pool_felab_cannot_run_is_refused(key_file: Path, pool: str) -> None:
    """gevent ended in "unexpected error (ModuleNotFoundError)" rc 70; '' was taken silently."""
    _write_private(key_file, json.dumps(_identity(GOOD_URL)))
    result = runner.invoke(app, ["worker", "start", "--name", "box", "--pool", pool])
    assert result.exit_code == 2, result.output
    assert "--pool" in result.output and "'solo', 'threads', 'prefork'" in result.output


# ------------------------------------------------------------------ on a real broker


def _paired(broker: RedisServer, tmp_path: Path, password: str = PASSWORD) -> Path:
    """Machine 1's broker user, made as the ingest makes it, and an identity file that logs in
    with `password`."""
    admin = broker.client()
    acl.set_machine(admin, Names(PREFIX), MachineCredential(1, secret_hash(PASSWORD)))
    path = tmp_path / "worker-box.json"
    url = f"redis://felab-machine.1:{password}@127.0.0.1:{broker.port}/0"
    _write_private(path, json.dumps(_identity(url)))
    return path


def _env(tmp_path: Path, key_file: Path, **extra: str) -> dict[str, str]:
    return {
        **base_env(),
        "FELAB_DATA_DIR": str(tmp_path / "data"),
        "FELAB_WORKER_KEY_FILE": str(key_file),
        "FELAB_BROKER_PREFIX": PREFIX,
        **extra,
    }


#: FELAB_RECONCILE_EVERY_S at its quickest: a refused login is then tried again for 15 s.
QUICK = {"FELAB_RECONCILE_EVERY_S": "0.1"}


def _start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FELAB, "worker", "start", "--name", "box", "--pool", "solo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.parametrize("how", ["removed", "wrong password"])
def test_a_refused_login_ends_in_words_after_a_restarts_grace(
    broker: RedisServer, tmp_path: Path, how: str
) -> None:
    """Celery retried "invalid username-password pair" forever ("Trying again ... (n/None)")."""
    key_file = _paired(broker, tmp_path, "not-" + PASSWORD if how == "wrong password" else PASSWORD)
    if how == "removed":  # `felab worker remove` on the server
        acl.remove_machine(broker.client(), Names(PREFIX), 1)
    began = time.monotonic()
    done = _start(_env(tmp_path, key_file, **QUICK))
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert 15 <= time.monotonic() - began < 45, out  # after the grace a restart needs, no more
    assert "trying again for up to 15 s" in done.stderr  # said at once
    assert "refused this machine's user (felab-machine.1) for 15 s" in done.stderr
    assert "felab worker pair --code CODE" in done.stderr
    assert "Traceback" not in out and "Trying again" not in out
    assert PASSWORD not in out
    assert not key_file.with_name("worker-box.state").exists()  # nothing made for it


@pytest.mark.slow
def test_a_login_refused_just_after_a_broker_restart_gets_in_once_its_user_is_back(
    broker: RedisServer, tmp_path: Path
) -> None:
    """A restarted Redis has lost its users until the ingest makes them again: a machine that
    starts in that window waits for its user (tests/e2e/test_secure_redis starts one there)."""
    key_file = _paired(broker, tmp_path)
    acl.remove_machine(broker.client(), Names(PREFIX), 1)  # the restart's loss
    log = tmp_path / "worker.log"
    proc = start_felab(
        [FELAB, "worker", "start", "--name", "box", "--pool", "solo", "--loglevel", "INFO"],
        _env(tmp_path, key_file, **QUICK),
        log,
    )
    try:
        wait_in(log, proc, "trying again for up to 15 s")
        acl.set_machine(broker.client(), Names(PREFIX), MachineCredential(1, secret_hash(PASSWORD)))
        wait_in(log, proc, " ready.")  # Celery's own word: it consumes its queue
    finally:
        kill_group(proc)
    assert "error:" not in log.read_text(errors="replace")


@pytest.mark.slow
def test_a_machine_removed_while_it_runs_stops_in_words_after_a_restarts_grace(
    broker: RedisServer, tmp_path: Path
) -> None:
    """`felab worker remove` while the worker ran: Celery retried "invalid username-password
    pair" forever, and felab's own loops logged a warning each beat (twelfth sweep's notes)."""
    key_file = _paired(broker, tmp_path)
    log = tmp_path / "worker.log"
    proc = start_felab(
        [FELAB, "worker", "start", "--name", "box", "--pool", "solo", "--loglevel", "INFO"],
        _env(tmp_path, key_file, FELAB_WORKER_HEARTBEAT_S="1", **QUICK),
        log,
    )
    try:
        wait_in(log, proc, " ready.")
        acl.remove_machine(broker.client(), Names(PREFIX), 1)  # `felab worker remove`
        removed = time.monotonic()
        code = proc.wait(60)
        took = time.monotonic() - removed
    finally:
        kill_group(proc)
    out = log.read_text(errors="replace")
    assert code == 2, out
    assert 15 <= took < 40, out  # the grace a broker restart needs, then a beat or two
    assert out.count("trying again for up to 15 s, in case the broker has just restarted") == 1
    assert (
        "refused this machine's user (felab-machine.1) for 15 s while the worker ran: it was "
        "removed or its password changed, so the worker stopped; pair again with "
        "`felab worker pair --code CODE`"
    ) in out
    said_each_beat = [
        line
        for line in out.splitlines()
        if ("heartbeat not sent" in line or "control list not read" in line)
        and "invalid username-password" in line
    ]
    assert said_each_beat == []  # once, above; the dropped connection itself may be said once
    assert "Traceback" not in out and PASSWORD not in out


@pytest.mark.slow
def test_a_fatal_celery_error_ends_non_zero_in_one_line(
    broker: RedisServer, tmp_path: Path
) -> None:
    """A queue its user may not read (FELAB_BROKER_PREFIX unlike the server's): Celery's
    "Unrecoverable error" printed its traceback and the command exited 0."""
    key_file = _paired(broker, tmp_path)
    env = _env(tmp_path, key_file, FELAB_BROKER_PREFIX="other:")
    done = _start(env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "FELAB_BROKER_PREFIX must be the server's (it is 'other:')" in errors[0]
    assert "Unrecoverable error" not in done.stderr
    debug = _start({**env, "FELAB_DEBUG": "1"})  # the traceback when asked for, same exit
    assert debug.returncode == 2, debug.stderr
    assert "Traceback" in debug.stderr and "NoPermissionError" in debug.stderr


@pytest.mark.slow
def test_a_broker_that_is_away_is_still_waited_for(tmp_path: Path) -> None:
    """Unreachable at start is not fatal: a machine that boots before its broker comes up on
    its own (the preflight login leaves it to Celery's retries)."""
    key_file = tmp_path / "worker-box.json"
    _write_private(
        key_file,
        json.dumps(_identity(f"redis://felab-machine.1:{PASSWORD}@127.0.0.1:{free_port()}/0")),
    )
    log = tmp_path / "worker.log"
    proc = start_felab(
        [FELAB, "worker", "start", "--name", "box", "--pool", "solo"], _env(tmp_path, key_file), log
    )
    try:
        # Celery's retries, said once (sweep 23 H1: Celery's "Cannot connect ... Trying again"
        # at every retry is no longer shown without --debug; the outage is one line)
        wait_in(log, proc, "retrying, the worker goes on when it is back")
        out = log.read_text(errors="replace")
        assert "the worker waits for it" in out
        time.sleep(3.0)  # Celery's second and third tries: not said again
        out = log.read_text(errors="replace")
        assert out.count("unreachable: ") == 1 and "Trying again" not in out, out
    finally:
        kill_group(proc)


def test_the_pairing_url_is_one_line_when_printed_to_a_file(
    broker: RedisServer, tmp_path: Path
) -> None:
    """Twelfth sweep (M2): `broker setup > file` cut the URL at 80 columns ('...@127.0.' on one
    line, '0.1:PORT/0' on the next); copied from there, pairing blamed the broker."""
    env = {
        **base_env(),
        "FELAB_DATA_DIR": str(tmp_path / "data"),
        "FELAB_BROKER_URL": broker.url,
        "FELAB_BROKER_PREFIX": PREFIX,
        "COLUMNS": "80",
    }
    out = subprocess.run(
        [FELAB, "broker", "setup"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stdout.splitlines() if "FELAB_BROKER_URL=" in ln]
    assert line.strip().endswith(f"127.0.0.1:{broker.port}/0"), out.stdout


def test_a_broker_port_that_never_answers_is_said_with_the_tls_hint(
    caplog: pytest.LogCaptureFixture, key_file: Path
) -> None:
    """redis:// pointed at a TLS port: the server takes the connection and waits for a TLS
    hello that never comes. The worker waits for the broker (it may be starting), and now says
    what such a silence usually is."""
    import socket
    import threading

    from felab_worker.login import _refused

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True).start()
    url = f"redis://felab-machine.1:{PASSWORD}@127.0.0.1:{listener.getsockname()[1]}/0"
    try:
        with caplog.at_level("WARNING", logger="felab.worker"):
            assert _refused(url, get_settings(), 0.5) is False  # not a refusal: waited for
    finally:
        for conn in held:
            conn.close()
        listener.close()
    said = caplog.text
    assert "the broker did not answer yet" in said and "is the URL rediss://" in said
    assert PASSWORD not in said

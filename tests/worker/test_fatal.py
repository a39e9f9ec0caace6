"""A Celery worker's fatal error ends the command in one line with a non-zero exit, for the
ingest as for a machine (thirteenth sweep: a broker queue key holding a string made `felab worker
ingest` print Celery's traceback and exit 0). Real redis-server, real `felab` processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from felab_worker.answers import broker_fault
from tests.e2e.fleet import FELAB, PREFIX, RedisServer, base_env, wait_for
from tests.worker.processes import kill_group, start_felab, wait_in


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


@pytest.mark.slow
def test_bodies_no_felab_process_wrote_are_dropped_and_the_ingest_goes_on(
    broker: RedisServer, tmp_path: Path
) -> None:
    """Any paired machine may push to the ingest's inbox, anyone with the pairing URL to the
    pairing inbox. One 'notjson' stopped the ingest (exit 70): kombu decodes before Celery sees
    a message, and its error was fatal."""
    env = {**base_env(), **broker.env(), "FELAB_DATA_DIR": str(tmp_path / "data")}
    log = tmp_path / "ingest.log"
    proc = start_felab(
        [FELAB, "worker", "ingest", "--loglevel", "INFO"],
        {**env, "FELAB_RECONCILE_EVERY_S": "0.5"},
        log,
    )
    junk = ["notjson", "[1, 2, 3]", "5", '{"a": 1}', '{"body": "x", "properties": 5}']
    try:
        wait_in(log, proc, " ready.")
        admin = broker.client()
        for body in junk:
            admin.lpush(f"{PREFIX}ingest.inbox", body)
            admin.lpush(f"{PREFIX}pairing.inbox", body)
        # said once a kind, then counted (sweep 24 M2): not a line each
        wait_for(
            lambda: admin.llen(f"{PREFIX}ingest.inbox") + admin.llen(f"{PREFIX}pairing.inbox") == 0,
            30,
            "both inboxes read",
        )
        wait_in(log, proc, "dropped a message", count=1)
        seen = log.read_text(errors="replace").count("felab.reconcile")
        wait_in(log, proc, "felab.reconcile", count=seen + 2)  # the beat goes on after them
        assert proc.poll() is None, log.read_text(errors="replace")
    finally:
        kill_group(proc)
    out = log.read_text(errors="replace")
    assert "Traceback" not in out and "Unrecoverable error" not in out
    assert 1 <= out.count("dropped a message") < 2 * len(junk), out
    assert admin.llen(f"{PREFIX}ingest.inbox") == 0 and admin.llen(f"{PREFIX}pairing.inbox") == 0


@pytest.mark.slow
def test_celerys_own_tasks_are_not_run_for_a_machine(broker: RedisServer, tmp_path: Path) -> None:
    """Celery registers its canvas tasks (celery.group, .map, .chord_unlock ...) in every app,
    and the ingest ran them for anyone who pushed one: celery.group publishes the signatures its
    message holds as the ingest, the broker's admin (a job named for another machine's queue did
    not land there in the thirteenth sweep's tries, kombu found no binding), celery.map runs a
    task once per item, celery.chord_unlock retries for good. The ingest registers felab's three
    tasks only, so such a message is refused as an unknown task, in one line (eighteenth sweep:
    Celery's own refusal was its traceback and a dump of the message)."""
    from celery import Celery

    env = {**base_env(), **broker.env(), "FELAB_DATA_DIR": str(tmp_path / "data")}
    log = tmp_path / "ingest.log"
    proc = start_felab([FELAB, "worker", "ingest", "--loglevel", "INFO"], env, log)
    forged = {
        "task": "felab.run_job",
        "args": [{"job_id": 1}],
        "kwargs": {},
        "options": {"exchange": "", "routing_key": "host.7.jobs"},
        "subtask_type": None,
        "immutable": False,
    }
    sender = Celery("hostile", broker=broker.url)
    sender.conf.broker_transport_options = {"global_keyprefix": PREFIX}
    try:
        wait_in(log, proc, " ready.")
        result = [["g1", None], [[["t1", None], None]]]  # a GroupResult as a tuple
        sender.send_task("celery.group", args=[[forged], result, "g1", []], queue="ingest.inbox")
        wait_in(log, proc, "refused a message on the broker: names an unknown task 'celery.group'")
        assert proc.poll() is None
        assert "Traceback" not in log.read_text(errors="replace")
    finally:
        kill_group(proc)
        sender.close()
    assert broker.client().llen(f"{PREFIX}host.7.jobs") == 0

"""The machine's own worker takes its queue through the ingest's gate (sweep 20, b, B10): a
job message with Celery callbacks, an eta or a built-in task's name is refused in one line, not
run, held, or answered with tracebacks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from felab_core.jobs.keys import Identity, new_private_key
from felab_core.settings import Settings
from felab_worker import machine
from felab_worker.gate import refusal
from tests.worker.test_ingest_inbox import EMBED, LINK, Message, envelope


@pytest.fixture
def tasks(tmp_path: Path) -> Iterator[dict[str, object]]:
    settings = Settings(broker_url="redis://127.0.0.1:1/0", data_dir=tmp_path)
    rt = machine.configure(Identity(7, "mac", new_private_key()), tmp_path / "k.json", settings)
    try:
        assert rt.app.conf.worker_consumer == "felab_worker.gate:GatedConsumer"
        yield rt.app.tasks
    finally:
        machine._runtime = None


def _job(**options: object) -> Message:
    body = [[{"job_id": 1}], {}, {**EMBED, **options}]
    return Message(envelope(body, headers={"task": "felab.run_job"}))


def test_only_the_job_task_is_taken(tasks: dict[str, object]) -> None:
    assert "felab.run_job" in tasks and all(n.startswith("felab.") for n in tasks)
    assert refusal(_job(), tasks) is None
    why = refusal(_job(callbacks=[LINK]), tasks)
    assert why is not None and "'callbacks' after the task" in why
    eta = Message(envelope([[{}], {}, EMBED], headers={"task": "felab.run_job", "eta": "2099"}))
    assert "'eta'" in (refusal(eta, tasks) or "")
    cleanup = Message(envelope([[], {}, EMBED], headers={"task": "celery.backend_cleanup"}))
    assert "unknown task 'celery.backend_cleanup'" in (refusal(cleanup, tasks) or "")

"""Publishing on the embedded broker: kombu's SQLAlchemy transport can lose a race to create a
queue (it reads the queue table, then inserts); felab_worker.broker.send_task tries again."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from felab_worker.broker import send_task


class _App:
    """Fails its first `failures` publishes with `error`, then takes them."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error = failures, error
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.tries = 0

    def send_task(self, name: str, **options: Any) -> None:
        self.tries += 1
        if self.tries <= self.failures:
            raise self.error
        self.sent.append((name, options))


RACE = IntegrityError("INSERT INTO kombu_queue", {}, Exception("UNIQUE constraint failed"))


def test_a_lost_queue_creation_race_is_tried_again() -> None:
    app = _App(failures=2, error=RACE)
    send_task(app, "felab.run_job", queue="felab.w1")
    assert app.tries == 3 and app.sent == [("felab.run_job", {"queue": "felab.w1"})]


def test_the_race_three_times_running_is_raised() -> None:
    app = _App(failures=3, error=RACE)
    with pytest.raises(IntegrityError):
        send_task(app, "felab.run_job")
    assert app.tries == 3 and not app.sent


def test_any_other_failure_is_raised_at_once() -> None:
    app = _App(failures=1, error=OperationalError("SELECT", {}, Exception("disk I/O error")))
    with pytest.raises(OperationalError):
        send_task(app, "felab.run_job")
    assert app.tries == 1

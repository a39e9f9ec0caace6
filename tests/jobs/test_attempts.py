"""Only an attempt felab sent counts as an earlier attempt's result (twenty-second sweep, b,
B14): a result signed with a made-up attempt id (32 hex digits, never sent) for a queued job
had been stored as "an earlier attempt's result"."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.messages import event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from tests.db_support import NOW
from tests.jobs.job_result import ARRIVED, job_body


def attempt_id(sent: int) -> str:
    """An id as felab numbers its sends (lifecycle.attempt_id), with other random digits."""
    return f"{sent:08x}{uuid.uuid4().hex[:24]}"


@pytest.mark.parametrize(
    "made_up",
    [
        lambda sends: uuid.uuid4().hex,  # felab's old form, never sent for this job
        lambda sends: attempt_id(sends),  # the current send's number, other digits
        lambda sends: attempt_id(sends + 1),  # a send still to come
        lambda sends: attempt_id(0),  # no send is the 0th
    ],
)
def test_a_result_of_an_attempt_felab_never_sent_is_dropped(
    db: Session, student: m.Member, made_up: object
) -> None:
    key = new_private_key()
    code = issue_pair_code(db, student, "mac", now=NOW)
    w = redeem_pair_code(db, code, Identity(0, "mac", key).public_key, now=NOW)
    job = queue_bench_job(db, student, w, "mlx", "quick", now=NOW).job
    attempt = made_up(job.attempts + job.resends)  # type: ignore[operator]
    assert attempt != job.attempt
    ev = event(w.id, "result", job_id=job.id, attempt=attempt, at=ARRIVED.timestamp())
    res = ingest_event(db, Identity(w.id, "mac", key).sign({**ev, "body": job_body(at=NOW)}),
                       now=ARRIVED)  # fmt: skip
    assert not res.accepted and "which felab never sent" in res.reason
    assert job.status == "queued" and db.query(m.BenchResult).count() == 0

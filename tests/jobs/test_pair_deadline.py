"""A pairing request its sender stopped waiting for (the ingest was stopped meanwhile) is refused
without spending the code (felab_core.jobs.pairing.check_still_awaited): redeemed late, it had
paired the machine to a key nobody holds, and the student's retry was told the code was used."""

from __future__ import annotations

import math

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid
from felab_core.jobs.handshake import make_request
from felab_core.jobs.keys import new_private_key, sign
from felab_core.jobs.pairing import (
    PairRequestLate,
    check_still_awaited,
    issue_pair_code,
    redeem_pair_request,
)
from tests.db_support import NOW

AT = NOW.timestamp()


def test_a_late_request_leaves_the_code_for_the_next_try(db: Session, student: m.Member) -> None:
    code = issue_pair_code(db, student, "mac", now=NOW)
    late = make_request(code, new_private_key(), None, until=AT - 30)
    with (
        pytest.raises(PairRequestLate, match="came 30 s after its sender stopped waiting"),
        db.begin_nested(),  # rolled back, as the ingest's session is on a refusal
    ):
        redeem_pair_request(db, late, now=NOW, now_s=AT)
    assert db.query(m.PairCode).one().used_at is None
    retry = make_request(code, new_private_key(), None, until=AT + 30)
    paired = redeem_pair_request(db, retry, now=NOW, now_s=AT)
    assert paired.worker.name == "mac" and paired.worker.public_key == retry["public_key"]
    with pytest.raises(Forbidden, match="already used"):  # and then the code is spent
        redeem_pair_request(db, make_request(code, new_private_key(), None), now=NOW, now_s=AT)


def test_the_deadline_is_signed_and_must_be_a_time(db: Session, student: m.Member) -> None:
    code = issue_pair_code(db, student, "mac", now=NOW)
    key = new_private_key()
    late = make_request(code, key, None, until=AT - 1)
    moved = sign({k: v for k, v in late.items() if k != "sig"} | {"until": AT + 60}, key)
    with pytest.raises(Forbidden, match="does not match its code"):  # the proof covers it
        redeem_pair_request(db, moved, now=NOW, now_s=AT)
    for bad in (math.nan, math.inf, True, "soon", [AT]):
        with pytest.raises(Invalid, match="deadline is not a time"):
            check_still_awaited({"until": bad}, AT)
    check_still_awaited({"until": AT}, AT)  # up to the deadline itself
    # an older felab's request names no deadline: redeemed as before
    assert redeem_pair_request(db, make_request(code, key, None), now=NOW, now_s=AT).worker

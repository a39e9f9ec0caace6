"""A pairing request made while the ingest is stopped is not redeemed when it comes back: the
student gave up waiting, so the ingest drops it (one log line) and the code stays good for the
retry. It had been redeemed late: the retry said "unknown or already used" and the database
showed the machine paired to a key nobody holds. Real redis-server of the test's own, real
PostgreSQL, real `felab` processes."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from datetime import date
from datetime import time as dtime

import pytest

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.people.members import add_member, create_cohort
from tests.e2e.fleet import FELAB, ROOT, Fleet, fleet_fixture, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

DROPPED = "dropped a pairing request that came"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path_factory.mktemp("late-pair"))


def _pair(code: str, env: dict[str, str], wait_s: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FELAB, "worker", "pair", "--code", code, "--timeout", str(wait_s)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_a_request_nobody_waits_for_leaves_the_code_good(fleet: Fleet) -> None:
    with session_scope(fleet.sessions) as s:
        c = create_cohort(
            s, "P", timezone="UTC", start_date=date(2026, 3, 2), post_time=dtime(9, 0),
            guild_id=f"g{uuid.uuid4().hex[:8]}", channel_id="c",
        )  # fmt: skip
        member = add_member(s, c, "1", display_name="Ada")
    env = fleet.student_env("studio", {"mlx": "http://127.0.0.1:9/v1"})  # broker set up
    code = fleet.code(member, "studio")
    gave_up = _pair(code, env, 2)  # no ingest yet: the request waits on the broker
    assert gave_up.returncode == 3, gave_up.stderr + gave_up.stdout
    said = " ".join(gave_up.stderr.split())
    assert "no answer from the ingest within 2 s; the code was not used" in said, said
    assert "check that `felab worker ingest` is running" in said, said
    assert "pair again with the same code" in said, said

    ingest = fleet.start_ingest()
    wait_for(lambda: DROPPED in ingest.text(), 60, "the late request dropped")
    retry = _pair(code, env, 20)  # the same code pairs the machine
    assert retry.returncode == 0, retry.stderr + retry.stdout
    assert "paired as studio" in retry.stdout
    out = ingest.text()
    assert out.count(DROPPED) == 1 and "its code was not used" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    with session_scope(fleet.sessions) as s:
        (worker,) = s.query(m.Worker).filter_by(member_id=member.id).all()
        assert worker.name == "studio" and worker.status == "paired"

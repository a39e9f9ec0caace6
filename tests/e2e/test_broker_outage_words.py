"""A broker that goes away under the ingest and a machine's worker, and pairing URLs that are
not the pairing URL (sweep 23: H1, M1, M2). Real redis-server of the test's own (stopped and
started again on the same port by its PID), real PostgreSQL, real `felab worker` processes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import date
from datetime import time as dtime

import pytest

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.people.members import add_member, create_cohort
from tests.e2e.fleet import Fleet, fleet_fixture, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

AWAY = "unreachable: "
BACK = " is back (away "
LOST = "the broker had lost felab's users"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path_factory.mktemp("outage"))


@pytest.fixture(scope="module")
def member(fleet: Fleet) -> m.Member:
    with session_scope(fleet.sessions) as s:
        c = create_cohort(
            s, "O", timezone="UTC", start_date=date(2026, 3, 2), post_time=dtime(9, 0),
            guild_id=f"g{uuid.uuid4().hex[:8]}", channel_id="c",
        )  # fmt: skip
        return add_member(s, c, "1", display_name="Ada")


def test_a_broker_restart_is_said_in_a_line_each_way_without_a_traceback(
    fleet: Fleet, member: m.Member
) -> None:
    """H1: while Redis was down the ingest's beat logged ~210 lines of chained redis, kombu and
    celery tracebacks for every beat it could not send (no --debug); the worker printed Celery's
    'Cannot connect ... Trying again' at every retry and a 7-line notice about Celery 6. Each
    now says the outage once and its end once, and goes on."""
    ingest = fleet.start_ingest()  # FELAB_RECONCILE_EVERY_S=0.5: many beats while it is down
    student = fleet.student_env("studio", {"mlx": "http://127.0.0.1:9/v1"})
    wid = fleet.pair(member, "studio", student)
    worker = fleet.start_student("studio", student)
    wait_for(lambda: fleet.job_worker_online(wid), 30, "studio online")
    for n in (1, 2):  # two outages: each said, and each end
        fleet.redis.stop()
        time.sleep(3.0)  # six beats of the ingest, six heartbeats of the worker
        fleet.redis.start()  # the same port
        for proc in (ingest, worker):
            wait_for(lambda p=proc, k=n: p.text().count(BACK) >= k, 60, f"back in {proc.log.name}")
        wait_for(lambda k=n: ingest.text().count(LOST) >= k, 30, "the users made again")
        time.sleep(1.5)  # the worker logged in again and beat before the next outage
    time.sleep(2.0)  # beats after the return: the ingest goes on
    for proc, who in ((ingest, "ingest"), (worker, "worker")):
        out = proc.text()
        assert proc.popen.poll() is None, out
        assert "Traceback" not in out and "Message Error" not in out, out[-4000:]
        assert "Trying again" not in out and "Celery 6.0" not in out, out[-4000:]
        assert "heartbeat not sent" not in out and "control list not read" not in out, out
        away = [line for line in out.splitlines() if AWAY in line]
        back = [line for line in out.splitlines() if BACK in line]
        assert len(away) == len(back) == 2, out[-4000:]  # one line each, per outage
        assert f"127.0.0.1:{fleet.redis.port}" in away[0] and "***" in away[0]
        assert f"retrying, the {who} goes on when it is back" in away[0]
        assert fleet.redis.password not in out
    assert ingest.text().count(LOST) == 2  # and it recovered, each time


def test_a_pairing_url_naming_another_database_is_said_so(fleet: Fleet, member: m.Member) -> None:
    """M1: /5 for /0 was blamed on the port ("answered ... but not as Redis does: is
    FELAB_BROKER_URL's port Redis's?"); Redis had refused SELECT 5 to the pairing user."""
    if fleet.ingest is None or fleet.ingest.popen.poll() is not None:
        fleet.start_ingest()
    student = fleet.student_env("dbfive", {})
    student["FELAB_BROKER_URL"] = student["FELAB_BROKER_URL"].removesuffix("/0") + "/5"
    with session_scope(fleet.sessions) as s:
        from felab_core.jobs.pairing import issue_pair_code

        code = issue_pair_code(s, s.merge(member), "dbfive")
    out = fleet.redeem(code, student)
    said = out.stdout + out.stderr
    assert out.returncode == 2, said
    assert "refused database 5 to user 'felab-pairing'" in said, said
    assert "exactly as your instructor gave it (it ends in /0)" in said
    assert "port Redis's" not in said and "Traceback" not in said


def test_a_machines_own_url_used_to_pair_is_named_not_the_prefix(
    fleet: Fleet, member: m.Member
) -> None:
    """M2: the URL from `felab worker identity --show-password` in FELAB_BROKER_URL was blamed on
    FELAB_BROKER_PREFIX; the user it names is a paired machine's, not the pairing user."""
    if fleet.ingest is None or fleet.ingest.popen.poll() is not None:
        fleet.start_ingest()
    student = fleet.student_env("owner", {})
    fleet.pair(member, "owner", student)
    own = fleet.own_url("owner", student)
    with session_scope(fleet.sessions) as s:
        from felab_core.jobs.pairing import issue_pair_code

        code = issue_pair_code(s, s.merge(member), "second")
    out = fleet.redeem(code, {**student, "FELAB_BROKER_URL": own})
    said = out.stdout + out.stderr
    assert out.returncode == 2, said
    assert "a paired machine's own user" in said and "felab-machine." in said, said
    assert "pairing URL (user felab-pairing)" in said
    assert "FELAB_BROKER_PREFIX" not in said
    password = own.split("@")[0].rsplit(":", 1)[1]
    assert password not in said

"""The fleet tried as a dishonest cohort member would: Mallory holds everything in her own row
(the pairing URL every student gets, her own paired machine's broker user and key, this source)
and goes after Ada, whose machine is paired and working. Real Redis with per-machine users,
real `felab worker` processes, the real ingest, PostgreSQL.

Each attack has its own test and is refused by Redis itself (NOPERM, checked against what it
would have done) or by the ingest; the honest path keeps working around them.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from datetime import time as dtime
from typing import Any

import pytest
import redis
from sqlalchemy import func, select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.errors import Invalid
from felab_core.jobs.handshake import answer_id, make_request, open_sealed
from felab_core.jobs.keys import Identity, new_private_key, sign
from felab_core.jobs.messages import JobMessage, event
from felab_core.jobs.queueing import queue_bench_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.members import add_member, create_cohort, set_hardware, set_server_model
from felab_core.reports.leaderboard import speed_boards, unranked
from felab_worker.dispatch import Dispatcher
from felab_worker.names import INGEST_QUEUE, PAIRING_QUEUE, Names
from tests.e2e.fleet import FELAB, PREFIX, ROOT, Fleet, fleet_fixture, wait_for
from tests.jobs.job_result import job_body

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
NAMES = Names(PREFIX)


@dataclass
class Cohort:
    fleet: Fleet
    ada: m.Member
    mallory: m.Member
    ada_worker: int
    mal_worker: int
    ada_env: dict[str, str]
    mal_env: dict[str, str]
    server: ScriptedServer

    def queue(self, member: m.Member, worker_id: int, **params: int) -> int:
        with session_scope(self.fleet.sessions) as s:
            worker = s.get(m.Worker, worker_id)
            assert worker is not None
            settings = self.fleet.settings(job_max_per_hour=1000)
            q = queue_bench_job(
                s, s.merge(member), worker, "mlx", "quick", params=params,
                send=Dispatcher(settings).send, settings=settings,
            )  # fmt: skip
            return q.job.id

    def done(self, job_id: int, timeout: float = 60) -> m.BenchJob:
        fleet = self.fleet
        return wait_for(
            lambda: (
                fleet.job(job_id).status in ("done", "failed", "cancelled", "expired")
                and fleet.job(job_id)
            ),
            timeout,
            f"job {job_id} to end",
        )

    def mallory_machine(self) -> Any:
        """A client logged in as Mallory's own machine (her row of the fleet)."""
        return self.fleet.redis.client(self.fleet.own_url("mal-box", self.mal_env))

    def mallory_pairing(self) -> Any:
        """A client logged in with the pairing URL every student is given."""
        return self.fleet.redis.client(self.fleet.pairing_url())


@pytest.fixture(scope="module")
def cohort(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cohort]:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.01, itl_s=0.002)).start_in_thread()
    url = f"http://127.0.0.1:{srv.port}"
    gen = fleet_fixture(tmp_path_factory.mktemp("redteam"))
    fleet = next(gen)
    try:
        with session_scope(fleet.sessions) as s:
            c = create_cohort(
                s, "Red", timezone="UTC", start_date=date(2026, 3, 2),
                post_time=dtime(9, 0), guild_id=f"g{uuid.uuid4().hex[:8]}", channel_id="c",
            )  # fmt: skip
            ada = add_member(s, c, "1", display_name="Ada")
            mallory = add_member(s, c, "2", display_name="Mallory")
        fleet.start_ingest()
        ada_env = fleet.student_env("ada-mac", {"mlx": url})
        mal_env = fleet.student_env("mal-box", {"mlx": url})
        aw = fleet.pair(ada, "ada-mac", ada_env)
        mw = fleet.pair(mallory, "mal-box", mal_env)
        fleet.start_student("ada-mac", ada_env)
        fleet.start_student("mal-box", mal_env)
        wait_for(lambda: fleet.job_worker_online(aw) and fleet.job_worker_online(mw), 30, "up")
        yield Cohort(fleet, ada, mallory, aw, mw, ada_env, mal_env, srv)
    finally:
        gen.close()
        srv.stop_thread()


def refused(call: Callable[[], Any]) -> None:
    """Redis refuses the call for lack of permission (NOPERM), not for any other reason."""
    with pytest.raises(redis.exceptions.NoPermissionError):
        call()


# ----------------------------------------------------------------------------- pairing theft


def test_pairing_cannot_be_stolen(cohort: Cohort) -> None:
    fleet = cohort.fleet
    pairing = cohort.mallory_pairing()
    # The pairing user can push a request but read nothing off the inbox: she cannot take Ada's.
    inbox = NAMES.key(PAIRING_QUEUE)
    for attempt in (
        lambda: pairing.brpop([inbox], timeout=1),
        lambda: pairing.rpop(inbox),
        lambda: pairing.lrange(inbox, 0, -1),
        lambda: pairing.delete(inbox),
        lambda: pairing.keys("*"),
        lambda: pairing.scan(0),
    ):
        refused(attempt)
    # Her own machine's user cannot read it either.
    refused(lambda: cohort.mallory_machine().rpop(inbox))

    # Suppose she got hold of Ada's request anyway (a copy) and swapped in her own key: the
    # proof no longer matches, the ingest refuses it, and Ada's code still pairs Ada.
    code = fleet.code(cohort.ada, "ada-laptop")
    ada_request = make_request(code, new_private_key(), None)
    mine = new_private_key()
    stolen = {k: v for k, v in ada_request.items() if k != "sig"}
    stolen["public_key"] = Identity(0, "x", mine).public_key
    forged = sign(stolen, mine)
    pairing.lpush(inbox, _celery_message("felab.pair", forged))
    answer_key = NAMES.answer_key(answer_id(forged))
    box = wait_for(lambda: pairing.get(answer_key), 15, "the ingest's answer")
    assert "does not match its code" in json.loads(box)["error"]
    refused(lambda: pairing.delete(answer_key))  # answers are read-only for her
    # The answer to a request sealed for a code she does not hold cannot be opened.
    with pytest.raises(Invalid):
        open_sealed("AAAAAA-BBBBBB-CCCCCC", json.dumps({"sealed": "x" * 40}))
    out = fleet.redeem(code, fleet.student_env("ada-laptop", {"mlx": "http://127.0.0.1:1"}))
    assert out.returncode == 0, out.stderr
    # The code works once: Mallory redeeming it afterwards is refused.
    again = fleet.redeem(code, cohort.mal_env)
    assert again.returncode == 2 and "unknown or already used" in again.stderr


def _celery_message(task: str, payload: dict[str, Any] | None) -> str:
    """A task message as kombu's Redis transport lays it out (what a hand-made push looks like)."""
    import base64

    args = [] if payload is None else [payload]
    body = json.dumps([args, {}, {"callbacks": None, "errbacks": None, "chain": None}])
    return json.dumps(
        {
            "body": base64.b64encode(body.encode()).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {"lang": "py", "task": task, "id": uuid.uuid4().hex, "retries": 0,
                        "argsrepr": "", "kwargsrepr": "", "origin": "mallory"},
            "properties": {
                "correlation_id": uuid.uuid4().hex, "delivery_mode": 2, "priority": 0,
                "body_encoding": "base64", "delivery_tag": uuid.uuid4().hex,
                "delivery_info": {"exchange": "", "routing_key": PAIRING_QUEUE},
            },
        }
    )  # fmt: skip


# ----------------------------------------------------------------------------- Ada's jobs


def test_another_machines_jobs_cannot_be_taken_killed_or_read(cohort: Cohort) -> None:
    mal = cohort.mallory_machine()
    aw = cohort.ada_worker
    queue = NAMES.key(NAMES.jobs_queue(aw))
    claim = NAMES.claim_key(aw, 1)
    control = NAMES.control_key(aw)
    for attempt in (
        lambda: mal.brpop([queue], timeout=1),  # take Ada's next job
        lambda: mal.lrange(queue, 0, -1),
        lambda: mal.delete(queue),
        lambda: mal.delete(claim),  # kill Ada's job by its attempt
        lambda: mal.set(claim, "forged"),
        lambda: mal.get(claim),
        lambda: mal.lpush(control, json.dumps({"cancel": {"job_id": 1}})),  # cancel it
        lambda: mal.rpop(control),  # eat its acknowledgements
        lambda: mal.lpush(queue, "x"),
    ):
        refused(attempt)
    # Machine 1x shares a prefix with machine 1 but not a key: host.1.* never covers host.10.*.
    assert f"host.{aw}." in queue and not queue.startswith(NAMES.machine_keys(aw * 10))
    # Meanwhile Ada's job runs and lands.
    job = cohort.done(cohort.queue(cohort.ada, aw))
    assert job.status == "done", job.error


def test_results_and_events_cannot_be_read(cohort: Cohort) -> None:
    mal = cohort.mallory_machine()
    inbox = NAMES.key(INGEST_QUEUE)
    for attempt in (
        lambda: mal.lrange(inbox, 0, -1),  # everyone's results, private members' included
        lambda: mal.rpop(inbox),
        lambda: mal.brpop([inbox], timeout=1),
        lambda: mal.llen(inbox),
        lambda: mal.delete(inbox),  # wipe everyone's pending results
        lambda: mal.keys("*"),
        lambda: mal.scan(0),
        lambda: mal.execute_command("MONITOR"),
        lambda: mal.hgetall(NAMES.key("unacked")),
        lambda: _listen(mal, "anything"),  # no channel is hers: nothing to overhear
    ):
        refused(attempt)


def _listen(client: Any, channel: str) -> Any:
    sub = client.pubsub()
    sub.subscribe(channel)
    return sub.get_message(timeout=2)


# ----------------------------------------------------------------------------- Redis itself


def test_no_lua_and_nothing_that_reconfigures_or_stops_redis(cohort: Cohort) -> None:
    for who in (cohort.mallory_machine(), cohort.mallory_pairing()):
        for attempt in (
            lambda c=who: c.eval("while true do end", 0),  # freeze Redis for the cohort
            lambda c=who: c.script_load("return 1"),
            lambda c=who: c.execute_command("FUNCTION", "LOAD", "#!lua name=x\nreturn 1"),
            lambda c=who: c.execute_command("FCALL", "x", 0),
            lambda c=who: c.flushall(),
            lambda c=who: c.flushdb(),
            lambda c=who: c.config_set("maxmemory", "1"),
            lambda c=who: c.config_get("*"),
            lambda c=who: c.execute_command("CLIENT", "KILL", "TYPE", "normal"),
            lambda c=who: c.acl_list(),
            lambda c=who: c.acl_setuser("me", enabled=True),
            lambda c=who: c.execute_command("SHUTDOWN", "NOSAVE"),
        ):
            refused(attempt)
    # DEBUG is off in this Redis anyway; ACL DRYRUN shows the users could not run it either.
    admin = cohort.fleet.redis.client()
    for user in (NAMES.machine_user(cohort.mal_worker), NAMES.pairing_user):
        verdict = admin.execute_command("ACL", "DRYRUN", user, "DEBUG", "SLEEP", "0")
        assert "no permissions" in str(verdict), verdict
    t0 = time.monotonic()
    assert admin.ping() and time.monotonic() - t0 < 1  # still answering


def test_a_push_too_large_for_any_result_is_refused_by_redis(cohort: Cohort) -> None:
    """Sixteenth sweep (b) F10: Mallory's machine pushed 150 MB into the ingest's inbox, and
    the ingest read it whole (1.24 GB) before its size check. The ingest caps Redis's
    proto-max-bulk-len at its start: Redis refuses the push at the door."""
    admin = cohort.fleet.redis.client()
    cap = int(admin.config_get("proto-max-bulk-len")["proto-max-bulk-len"])
    assert cap == 8 * 1024 * 1024
    mal = cohort.mallory_machine()
    with pytest.raises(redis.exceptions.RedisError):
        mal.lpush(NAMES.key(INGEST_QUEUE), b"x" * (cap + 1))
    assert admin.llen(NAMES.key(INGEST_QUEUE)) == 0 and admin.ping()


# ----------------------------------------------------------------------------- forged work


def _mallory_worker_runs(cohort: Cohort, message: JobMessage) -> None:
    """Mallory pushes a hand-made job into her own queue (which her user may do)."""
    mal = cohort.mallory_machine()
    body = {"args": [message.to_dict()]}
    mal.set(NAMES.claim_key(cohort.mal_worker, message.job_id), message.attempt)
    mal.lpush(
        NAMES.key(NAMES.jobs_queue(cohort.mal_worker)),
        _celery_message("felab.run_job", body["args"][0]).replace(
            f'"routing_key": "{PAIRING_QUEUE}"',
            f'"routing_key": "{NAMES.jobs_queue(cohort.mal_worker)}"',
        ),
    )


def test_forged_jobs_and_attempts_run_nothing_that_counts(cohort: Cohort) -> None:
    fleet = cohort.fleet
    with session_scope(fleet.sessions) as s:
        jobs_before = s.scalar(select(func.count()).select_from(m.BenchJob))
        numbers_before = s.scalar(select(func.count()).select_from(m.Number))
        ada_job = cohort.queue(cohort.ada, cohort.ada_worker)
    cohort.done(ada_job)
    # Jobs her own worker runs but the database never queued: a made-up id, and Ada's job id.
    for job_id in (999_999, ada_job):
        _mallory_worker_runs(
            cohort,
            JobMessage(job_id=job_id, attempt=uuid.uuid4().hex, worker_id=cohort.mal_worker,
                       target="mlx", preset="quick", params={"requests": 1}),
        )  # fmt: skip
    ingest = fleet.ingest
    assert ingest is not None
    wait_for(
        lambda: f"named job {ada_job}, which that machine was not given" in ingest.text(),
        30,
        "refusal",
    )
    wait_for(lambda: "no job 999999" in ingest.text(), 30, "the made-up job dropped")
    with session_scope(fleet.sessions) as s:
        assert s.scalar(select(func.count()).select_from(m.BenchJob)) == jobs_before + 1
        assert s.scalar(select(func.count()).select_from(m.Number)) == numbers_before + 1
        assert s.get(m.BenchJob, ada_job).status == "done"  # type: ignore[union-attr]
    # The hourly quota is counted in the database, so nothing on the broker raises it.
    settings = fleet.settings(job_max_per_hour=2)
    with session_scope(fleet.sessions) as s, pytest.raises(Exception, match="in the last hour"):
        for _ in range(3):
            worker = s.get(m.Worker, cohort.mal_worker)
            assert worker is not None
            queue_bench_job(s, s.merge(cohort.mallory), worker, "mlx", "quick", settings=settings)


def test_a_server_task_pushed_at_a_machine_or_the_inbox_does_nothing(cohort: Cohort) -> None:
    fleet = cohort.fleet
    mal = cohort.mallory_machine()
    # The ingest's own timer queue is not hers to push to.
    refused(lambda: mal.lpush(NAMES.key("server.beat"), "x"))
    # The reconciler asked for through the inbox, a hundred times: it runs at most twice a beat.
    inbox = NAMES.key(INGEST_QUEUE)
    for _ in range(100):
        mal.lpush(
            inbox, _celery_message("felab.reconcile", None).replace(PAIRING_QUEUE, INGEST_QUEUE)
        )
    ingest = fleet.ingest
    assert ingest is not None
    wait_for(lambda: "a reconcile asked for between beats was skipped" in ingest.text(), 20, "skip")
    # A student worker registers only its own task: the ingest's is unknown there, refused in
    # one line by the gate the ingest has (sweep 20, b, B10).
    mal.lpush(
        NAMES.key(NAMES.jobs_queue(cohort.mal_worker)),
        _celery_message("felab.ingest", {}).replace(
            PAIRING_QUEUE, NAMES.jobs_queue(cohort.mal_worker)
        ),
    )
    log = fleet.tmp / "student-mal-box.log"
    refusal = "refused a message on the broker: names an unknown task 'felab.ingest' (dropped)"
    wait_for(lambda: refusal in log.read_text(), 20, "refusal")


# ----------------------------------------------------------------------------- replay


def _key_of(cohort: Cohort, name: str) -> Identity:
    home = cohort.fleet.tmp / f"student-{name}"
    return Identity.load(home / f"worker-{name}.json")


def test_replayed_and_stale_events_are_refused(cohort: Cohort) -> None:
    fleet = cohort.fleet
    me = _key_of(cohort, "mal-box")
    dispatcher = Dispatcher(fleet.settings())
    ingest = fleet.ingest
    assert ingest is not None

    def push(payload: dict[str, Any]) -> None:
        dispatcher.app.send_task("felab.ingest", args=[payload], queue=INGEST_QUEUE)

    # A heartbeat copied and sent again: its sequence number is not new.
    beat = me.sign(event(me.worker_id, "heartbeat", body={"seq": 5}))
    push(beat)
    wait_for(lambda: "replayed heartbeat of 'mal-box'" in ingest.text(), 20, "the replay refused")
    # An event signed an hour and more ago (a copy from the broker's past).
    old = me.sign(event(me.worker_id, "heartbeat", body={"seq": 10**15}, at=time.time() - 4000))
    push(old)
    wait_for(lambda: "an old copy (or a clock far off) is refused" in ingest.text(), 20, "refusal")
    # A finished job's result sent again lands nothing twice.
    job_id = cohort.queue(cohort.mallory, cohort.mal_worker)
    job = cohort.done(job_id)
    assert job.status == "done"
    with session_scope(fleet.sessions) as s:
        row = s.scalars(select(m.BenchResult).where(m.BenchResult.job_id == job_id)).one().row
    again = me.sign(event(me.worker_id, "result", job_id=job_id, attempt="x", body={"rows": [row]}))
    push(again)
    wait_for(lambda: f"job {job_id} is already done" in ingest.text(), 20, "the copy dropped")
    with session_scope(fleet.sessions) as s:
        assert s.query(m.BenchResult).filter_by(job_id=job_id).count() == 1


# ----------------------------------------------------------------------------- lying numbers


def test_an_impossible_speed_is_flagged_and_not_ranked(cohort: Cohort) -> None:
    fleet = cohort.fleet
    with session_scope(fleet.sessions) as s:
        mallory = s.merge(cohort.mallory)
        set_hardware(s, mallory, chip="M4 Pro")  # 273 GB/s
        set_server_model(s, mallory, "mlx", "tiny", model_bytes="4.5GB")  # ~61 tokens/s limit
    me = _key_of(cohort, "mal-box")
    job_id = cohort.queue(cohort.mallory, cohort.mal_worker)
    attempt = wait_for(lambda: fleet.job(job_id).attempt, 10, "the attempt")
    with session_scope(fleet.sessions) as s:  # her "run" took minutes: the job is that old
        made = s.get(m.BenchJob, job_id)
        assert made is not None
        made.created_at -= timedelta(minutes=10)
    # Her own worker, her own job, correctly signed: a result claiming 99,999 tokens/s, with
    # request records made to agree.
    fake = {"ok": True, "writing_tps": 99_999.0, "output_tokens": 16, "tpot_s": 1 / 99_999}
    requests = [{"index": i, **fake, "ttft_s": 0.01, "e2e_s": 0.02} for i in range(3)]
    body = job_body(model="tiny", writing_tps_p50="99999.0", ttft_p50_s="0.01")
    body["record"]["runs"][0]["requests"] = requests
    Dispatcher(fleet.settings()).app.send_task(
        "felab.ingest",
        args=[me.sign(event(me.worker_id, "result", job_id=job_id, attempt=attempt, body=body))],
        queue=INGEST_QUEUE,
    )
    job = cohort.done(job_id)
    assert job.status == "done"
    with session_scope(fleet.sessions) as s:
        number = s.scalars(select(m.Number).where(m.Number.job_id == job_id)).one()
        assert number.verdict == "flagged" and "this machine can reach" in (
            number.verdict_note or ""
        )
        boards = speed_boards(s, cohort.ada.cohort_id, "mlx", include_private=True)
        ranked = [r.value for b in boards for r in b.rows]
        assert 99_999.0 not in ranked  # not first, not anywhere
        assert [
            u.number_id for u in unranked(s, cohort.ada.cohort_id) if u.verdict == "flagged"
        ] == [number.id]


# ----------------------------------------------------------------------------- revocation


def test_a_removed_machine_is_cut_off_at_once(cohort: Cohort) -> None:
    fleet = cohort.fleet
    # A third machine of Mallory's, removed by an instructor-like command on the server.
    env = fleet.student_env("mal-spare", {"mlx": "http://127.0.0.1:1"})
    wid = fleet.pair(cohort.mallory, "mal-spare", env)
    client = fleet.redis.client(fleet.own_url("mal-spare", env))
    assert client.ping()
    out = subprocess.run(
        [FELAB, "worker", "remove", "mal-spare", "--member", "2", "--cohort",
         str(cohort.mallory.cohort_id)],
        env=fleet.ingest_env(), capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    with pytest.raises(redis.exceptions.ConnectionError):
        client.ping()  # the live connection was dropped, and logging in again fails
    with session_scope(fleet.sessions) as s:
        w = s.get(m.Worker, wid)
        assert w is not None and w.status == "removed" and w.public_key is None


def test_a_wrong_prefix_is_named_not_called_unreachable(cohort: Cohort, tmp_path: Any) -> None:
    """Sixteenth sweep (b) F20: the broker refused the pairing user another prefix's inbox,
    and `worker pair` said it "could not reach the broker" (exit 3)."""
    fleet = cohort.fleet
    env = {
        **fleet.student_env("typo-box", {}),
        "FELAB_BROKER_PREFIX": "wrongp:",
        "FELAB_DATA_DIR": str(tmp_path),
    }
    out = fleet.redeem(fleet.code(cohort.mallory, "typo-box"), env)
    assert out.returncode == 2, out.stderr + out.stdout
    assert "FELAB_BROKER_PREFIX must be the server's" in out.stderr, out.stderr

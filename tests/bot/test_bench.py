"""`/bench`, `/worker` and the outbox: queued through the jobs service on the member's own
worker, clear refusals, and each finished job posted once (privately for a private member)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import discord
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_bot import bench
from felab_bot.cogs import bench as cog_module
from felab_bot.cogs.bench import BenchCog
from felab_bot.who import Who
from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid, NotFound
from felab_core.jobs.render import render_job
from felab_core.numbers.recording import record_measured
from felab_core.people.members import find_member, set_public_numbers
from tests.bot.support import CHANNEL, USER, FakeBot, Place, chat_cohort, who_in
from tests.db_support import NOW

KEY = "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE="


@pytest.fixture
def cohort(db: Session, day2: None) -> m.Cohort:
    return chat_cohort(db)


def _member(db: Session, cohort: m.Cohort, who: Who) -> m.Member:
    bench.workers(db, who, NOW)  # joins the cohort on first use
    member = find_member(db, cohort.id, str(who.user_id))
    assert member is not None
    return member


def _worker(db: Session, member: m.Member, name: str = "studio", seen: bool = True) -> m.Worker:
    w = m.Worker(
        member_id=member.id,
        name=name,
        public_key=KEY,
        status="paired",
        created_at=NOW,
        last_seen_at=NOW if seen else None,
    )
    db.add(w)
    db.flush()
    return w


def _queue(db: Session, who: Who, targets: str = "mlx", **kw: Any) -> tuple[str, list[Any]]:
    sent: list[Any] = []
    args: dict[str, Any] = {"worker": None, "preset": "day2", "params": {}, "send": sent.append}
    args.update(kw)
    text = bench.bench(db, who, targets, now=NOW, **args)
    return text, sent


def test_no_worker_gets_a_clear_answer(db: Session, cohort: m.Cohort) -> None:
    text, _ = _queue(db, who_in(cohort))
    assert "no paired worker" in text and "/worker pair" in text
    assert db.scalars(select(m.BenchJob)).all() == []
    assert "no paired worker" in bench.workers(db, who_in(cohort), NOW)


def test_one_job_per_target_on_the_own_worker(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    _worker(db, _member(db, cohort, who))
    text, _ = _queue(db, who, "mlx, llamacpp mlx", params={"requests": 3})
    jobs = db.scalars(select(m.BenchJob).order_by(m.BenchJob.id)).all()
    assert [(j.target, j.status, j.params) for j in jobs] == [
        ("mlx", "queued", {"requests": 3}),
        ("llamacpp", "queued", {"requests": 3}),
    ]
    assert f"Job {jobs[0].id}: mlx on studio" in text


def test_several_workers_need_a_choice_and_autocomplete_lists_them(
    db: Session, cohort: m.Cohort
) -> None:
    who = who_in(cohort)
    member = _member(db, cohort, who)
    _worker(db, member, "studio")
    _worker(db, member, "air", seen=False)
    text, _ = _queue(db, who)
    assert "several workers (air, studio)" in text
    assert bench.worker_names(db, who, "st", NOW) == ["studio"]
    assert bench.worker_names(db, who, "", NOW) == ["air", "studio"]
    text, _ = _queue(db, who, worker="air")
    assert "offline" in text and "queued" in text
    with pytest.raises(NotFound, match="no worker named 'mac'"):
        _queue(db, who, worker="mac")


def test_someone_elses_worker_and_a_url_are_refused(db: Session, cohort: m.Cohort) -> None:
    owner = who_in(cohort, user=USER + 1, name="Bea")
    _worker(db, _member(db, cohort, owner), "beas-mac")
    who = who_in(cohort)
    _member(db, cohort, who)
    with pytest.raises(NotFound):
        _queue(db, who, worker="beas-mac")
    _worker(db, find_member(db, cohort.id, str(USER)) or pytest.fail(), "studio")
    with pytest.raises(Invalid, match="not a target name"):
        _queue(db, who, "http://10.0.0.1:8080")


def test_pair_status_cancel(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    code_text = bench.pair(db, who, "studio", False, NOW)
    assert "felab worker pair" in code_text and db.scalars(select(m.PairCode)).one()
    with pytest.raises(Invalid):
        bench.pair(db, who, "bad name!", False, NOW)
    _worker(db, _member(db, cohort, who))
    _queue(db, who)
    job = db.scalars(select(m.BenchJob)).one()
    assert f"{job.id}" in bench.status(db, who, NOW) and "queued" in bench.status(db, who, NOW)
    done = bench.cancel(db, who, job.id, NOW)
    assert done.text == f"Job {job.id} cancelled." and job.status == "cancelled"
    with pytest.raises(Invalid, match="already cancelled"):
        bench.cancel(db, who, job.id, NOW)
    stranger = who_in(cohort, user=USER + 5)
    bench.workers(db, stranger, NOW)
    _queue(db, who)
    job2 = db.scalars(select(m.BenchJob).order_by(m.BenchJob.id.desc())).first()
    assert job2 is not None and job2.status == "queued"
    with pytest.raises(Forbidden):
        bench.cancel(db, stranger, job2.id, NOW)


def test_a_run_spread_over_the_members_machines(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    member = _member(db, cohort, who)
    _worker(db, member, "studio")
    with pytest.raises(Invalid, match=r"online with target 'mlx'; you have 1 \(studio\)"):
        _queue(db, who, spread=2, params={"concurrency": 2, "requests": 4})
    _worker(db, member, "box")
    for targets, worker in (("mlx llamacpp", None), ("mlx", "box")):
        with pytest.raises(Invalid, match="name one target, no worker"):
            _queue(db, who, targets, spread=2, worker=worker)
    text, _ = _queue(db, who, spread=2, params={"concurrency": 2, "requests": 4})
    assert "mlx spread over box, studio, preset day2: queued" in text
    assert "start together in 20 s" in text
    parent = db.scalars(select(m.BenchJob).where(m.BenchJob.spread_of.is_(None))).one()
    parts = db.scalars(select(m.BenchJob).where(m.BenchJob.spread_of == parent.id)).all()
    assert parent.worker_id is None and parent.shards == 2
    assert sorted(p.shard_index or 0 for p in parts) == [0, 1]
    assert {p.start_at for p in parts} == {parent.start_at} and len(
        {p.worker_id for p in parts}
    ) == 2
    done = bench.cancel(db, who, parent.id, NOW)
    assert sorted(done.deliveries) == sorted((p.id, p.worker_id) for p in parts)
    assert {p.status for p in parts} == {"cancelled"}


ROW = {
    "server": "mlx",
    "model": "llama-3.1-8b-4bit",
    "preset": "day2",
    "concurrency": "1",
    "ok": "3",
    "failed": "0",
    "writing_tps_p50": "41.2",
    "ttft_p50_s": "0.31",
}


def _finish(db: Session, job: m.BenchJob, png: bytes | None = b"\x89PNG fake") -> None:
    """What the ingest does with a result (the jobs service's part, done by hand here)."""
    record_measured(db, job, ROW, now=NOW)
    job.status = "done"
    job.chart_png = png
    db.add(m.JobOutbox(job_id=job.id, created_at=NOW))
    db.flush()


async def test_the_outbox_posts_each_result_once(
    db: Session, cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cog_module, "now", lambda: NOW)
    monkeypatch.setattr(cog_module.discord.abc, "Messageable", Place)
    who = who_in(cohort)
    _worker(db, _member(db, cohort, who))
    _queue(db, who)
    job = db.scalars(select(m.BenchJob)).one()
    _finish(db, job)
    fake = FakeBot(db)
    channel = Place()
    fake.places[CHANNEL] = channel
    cog = BenchCog(fake)  # type: ignore[arg-type]
    assert await cog.post_results() == 1
    [(text, files)] = channel.sent
    assert text == render_job(db, job).text  # the one text: what the demo prints too
    assert text.startswith(f"<@{USER}> **Benchmark {job.id}**") and "41.2" in text
    assert "310 ms" in text
    assert all(len(line) <= 40 for line in text.split("```")[1].splitlines())  # a phone's width
    assert [f.filename for f in files] == [f"felab-job{job.id}.png", f"felab-job{job.id}.csv"]
    # Only the owner may be pinged; a model name or a role written into the text pings no one.
    [mentions] = channel.mentions
    assert mentions.everyone is False and mentions.roles is False
    assert [u.id for u in mentions.users] == [USER]
    assert isinstance(files[0], discord.File)
    assert await cog.post_results() == 0  # posted: never twice
    assert db.scalars(select(m.JobOutbox)).one().posted_at is not None


async def test_a_private_member_gets_the_result_alone(
    db: Session, cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cog_module, "now", lambda: NOW)
    who = who_in(cohort)
    member = _member(db, cohort, who)
    set_public_numbers(db, member, False)
    _worker(db, member)
    _queue(db, who)
    _finish(db, db.scalars(select(m.BenchJob)).one(), png=None)
    fake = FakeBot(db)
    channel, dm = Place(), Place()
    fake.places.update({CHANNEL: channel, USER: dm})
    assert await BenchCog(fake).post_results() == 1  # type: ignore[arg-type]
    assert channel.sent == [] and len(dm.sent) == 1
    job_id = db.scalars(select(m.BenchJob)).one().id
    assert [f.filename for f in dm.sent[0][1]] == [f"felab-job{job_id}.csv"]


async def test_a_failed_post_is_tried_again_after_the_lease(
    db: Session, cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    who = who_in(cohort)
    _worker(db, _member(db, cohort, who))
    _queue(db, who)
    job = db.scalars(select(m.BenchJob)).one()
    job.status, job.error = "failed", "mlx is not in the worker's targets file (has: ollama)"
    db.add(m.JobOutbox(job_id=job.id, created_at=NOW))
    db.flush()
    fake = FakeBot(db)  # no channel known and fetch fails
    cog = BenchCog(fake)  # type: ignore[arg-type]

    async def fetch_channel(_id: int) -> Any:
        raise discord.HTTPException(type("R", (), {"status": 403, "reason": "x"})(), "no")

    fake.fetch_channel = fetch_channel  # type: ignore[attr-defined]
    monkeypatch.setattr(cog_module, "now", lambda: NOW)
    assert await cog.post_results() == 0
    channel = Place()
    fake.places[CHANNEL] = channel
    monkeypatch.setattr(cog_module.discord.abc, "Messageable", Place)
    assert await cog.post_results() == 0  # waits: tried again 30 s after the refusal
    entry = db.scalars(select(m.JobOutbox)).one()
    assert entry.attempts == 1 and "HTTPException" in (entry.last_error or "")
    monkeypatch.setattr(cog_module, "now", lambda: NOW + timedelta(minutes=2))
    assert await cog.post_results() == 1
    assert "failed\nmlx is not in the worker's targets file" in channel.sent[0][0]


async def test_a_post_discord_keeps_refusing_becomes_a_dead_letter(
    db: Session, cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    from felab_core.jobs.outbox import dead_letters, retry_dead

    who = who_in(cohort)
    _worker(db, _member(db, cohort, who))
    _queue(db, who)
    job = db.scalars(select(m.BenchJob)).one()
    job.status, job.error = "failed", "no such target"
    db.add(m.JobOutbox(job_id=job.id, created_at=NOW))
    db.flush()
    fake = FakeBot(db)

    async def fetch_channel(_id: int) -> Any:
        raise discord.HTTPException(type("R", (), {"status": 500, "reason": "x"})(), "down")

    fake.fetch_channel = fetch_channel  # type: ignore[attr-defined]
    cog = BenchCog(fake)  # type: ignore[arg-type]
    clock = NOW
    for _ in range(10):  # far more looks than tries: each waits for its backoff
        monkeypatch.setattr(cog_module, "now", lambda clock=clock: clock)
        assert await cog.post_results() == 0
        clock += timedelta(hours=2)
    entry = db.scalars(select(m.JobOutbox)).one()
    assert entry.attempts == 5 and entry.dead_at is not None and entry.posted_at is None
    assert [d.id for d in dead_letters(db)] == [entry.id]
    retry_dead(db, entry.id)  # an instructor hands it back once the channel is fixed
    channel = Place()
    fake.places[CHANNEL] = channel
    monkeypatch.setattr(cog_module.discord.abc, "Messageable", Place)
    assert await cog.post_results() == 1 and dead_letters(db) == []


class _Closed(Place):
    async def send(self, text: str, files: Any = None, **kw: Any) -> Any:
        response = type("R", (), {"status": 403, "reason": "Forbidden"})()
        raise discord.Forbidden(
            response, {"message": "Cannot send messages to this user", "code": 50007}
        )


async def test_a_member_who_refuses_direct_messages_is_not_retried_forever(
    db: Session, cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cog_module, "now", lambda: NOW)
    who = who_in(cohort)
    member = _member(db, cohort, who)
    set_public_numbers(db, member, False)
    _worker(db, member)
    _queue(db, who)
    _finish(db, db.scalars(select(m.BenchJob)).one())
    fake = FakeBot(db)
    fake.places[USER] = _Closed()
    assert await BenchCog(fake).post_results() == 0  # type: ignore[arg-type]
    row = db.scalars(select(m.JobOutbox)).one()
    assert row.posted_at is not None and row.message_ref == "dm-refused"


class _Interaction:
    """What the cog reads of an interaction: who, where, the options typed so far, replies."""

    def __init__(self, cohort: m.Cohort, worker: str | None = None) -> None:
        self.guild_id = int(cohort.guild_id or 0)
        self.channel_id = int(cohort.channel_id or 0)
        self.user = type("U", (), {"id": USER, "display_name": "Ada"})()
        self.namespace = type("NS", (), {"worker": worker})()
        self.replies: list[tuple[str, dict[str, Any]]] = []
        outer = self

        class _Response:
            async def send_message(self, text: str, **kw: Any) -> None:
                outer.replies.append((text, kw))

            async def defer(self, **kw: Any) -> None:
                outer.replies.append(("(thinking)", kw))

        class _Followup:
            async def send(self, text: str, **kw: Any) -> None:
                outer.replies.append((text, kw))

        self.response = _Response()
        self.followup = _Followup()


async def test_a_target_the_machine_lacks_is_refused_at_once_with_what_it_has(
    db: Session, cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cog_module, "now", lambda: NOW)
    who = who_in(cohort)
    member = _member(db, cohort, who)
    studio = _worker(db, member, "studio")
    studio.targets = {"mlx": "mlx", "llamacpp": "llamacpp", "gpu": "vllm"}
    air = _worker(db, member, "air")
    air.targets = {"ollama": "ollama"}
    db.flush()
    fake = FakeBot(db)
    cog = BenchCog(fake)  # type: ignore[arg-type]

    inter = _Interaction(cohort, worker="studio")
    await BenchCog.run.callback(cog, inter, targets="mlx mlx2", worker="studio")  # type: ignore[arg-type]
    text, kw = inter.replies[-1]
    assert text.startswith("your machine studio has no target mlx2; it has: gpu, llamacpp, mlx")
    assert kw.get("ephemeral") is True
    assert db.scalars(select(m.BenchJob)).all() == []  # nothing half-queued

    inter = _Interaction(cohort, worker="studio")
    await BenchCog.run.callback(cog, inter, targets="mlx gpu", worker="studio")  # type: ignore[arg-type]
    assert "mlx on studio" in inter.replies[-1][0] and "gpu on studio" in inter.replies[-1][0]
    jobs = db.scalars(select(m.BenchJob).order_by(m.BenchJob.id)).all()
    assert [j.target for j in jobs] == ["mlx", "gpu"]

    # Autocomplete offers the chosen machine's targets, completing the last word typed.
    async def names(current: str, worker: str | None) -> list[str]:
        choices = await cog._targets(_Interaction(cohort, worker), current)  # type: ignore[arg-type]
        return [c.value for c in choices]

    assert await names("", "studio") == ["gpu", "llamacpp", "mlx"]
    assert await names("m", "studio") == ["mlx"]
    assert await names("mlx ", "studio") == ["mlx gpu", "mlx llamacpp"]
    assert await names("mlx l", "studio") == ["mlx llamacpp"]
    assert await names("", "air") == ["ollama"]
    assert await names("", None) == []  # two machines and none chosen: nothing to guess
    assert await names("", "nope") == []

    listed = bench.workers(db, who, NOW)
    assert "**studio**: online" in listed and "targets: gpu, llamacpp, mlx" in listed
    air.targets = None
    assert "targets not reported yet" in bench.workers(db, who, NOW)

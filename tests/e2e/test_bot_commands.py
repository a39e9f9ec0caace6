"""The real bot process's numbers, bench, worker, instructors' and /me commands against the fake
Discord: the modal round trip, the deferred /bench, a result posted once with its chart and CSV
(privately for a private member), instructors checked at run time, export and delete."""

from __future__ import annotations

import re
import subprocess
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import new_private_key, public_key_text, sign
from felab_core.jobs.pairing import redeem_pair_code
from felab_core.people.members import set_hardware, set_server_model
from tests.e2e.test_bot_process import (  # noqa: F401 (the `world` fixture)
    ADA,
    BOB,
    EPHEMERAL,
    FELAB,
    ROOT,
    BotWorld,
    answered,
    world,
)
from tests.fakediscord.server import Interaction
from tests.jobs.job_result import job_body, job_record

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


def sub(name: str, *options: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": 1, "name": name, "options": list(options)}]


def opt(name: str, value: Any, kind: int = 3) -> dict[str, Any]:
    return {"type": kind, "name": name, "value": value}


def followed_up(w: BotWorld, it: Interaction) -> dict[str, Any]:
    """A deferred answer: acknowledged within 3 s, then the followup."""
    first = answered(w, it)
    assert first["type"] == 5 and first["data"]["flags"] & EPHEMERAL
    w.wait(lambda: it.followups, 10, "the followup")
    return it.followups[0]


def reply(w: BotWorld, it: Interaction) -> dict[str, Any]:
    """The answer's message, whether sent at once or deferred then followed up."""
    first = answered(w, it)
    if first["type"] == 5:
        return followed_up(w, it)
    assert first["type"] == 4 and first["data"]["flags"] & EPHEMERAL
    assert it.message_id is not None
    return w.fake.messages[it.message_id]


def attachments(w: BotWorld, message: dict[str, Any]) -> dict[str, bytes]:
    return {
        a["filename"]: w.fake.attachment(message, a["filename"]) for a in message["attachments"]
    }


def test_commands_end_to_end(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    env = {**world.env(), "FELAB_DISCORD_OUTBOX_EVERY_S": "0.3"}
    out = subprocess.run(
        [FELAB, "bot", "sync", "--guild", fake.guild_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    names = {c["name"] for c in fake.commands[fake.guild_id]}
    assert names == {
        "drill",
        "numbers",
        "bench",
        "worker",
        "leaderboard",
        "progress",
        "me",
        "speak",
        "setup",
        "join",
    }
    [setup_cmd] = [c for c in fake.commands[fake.guild_id] if c["name"] == "setup"]
    assert str(setup_cmd["default_member_permissions"]) == "32"  # Manage Server
    world.env = lambda: env  # type: ignore[method-assign]
    world.start_bot()
    world.wait(fake.connected, 20, "the bot to log in and identify")

    # /numbers enter: a modal with Day 2's three fields, the course's sample as a hint.
    it = fake.slash("numbers", ADA, options=sub("enter"))
    resp = answered(world, it)
    assert resp["type"] == 9
    inputs = [row["components"][0] for row in resp["data"]["components"]]
    assert [i["label"] for i in inputs] == [
        "Ollama: writing speed",
        "llama.cpp: writing speed",
        "MLX: writing speed",
    ]
    assert inputs[0]["placeholder"] == "e.g. 44.6 tokens/s"
    ids = [i["custom_id"] for i in inputs]
    done = fake.submit_modal(it, {ids[0]: "44.6", ids[2]: "fast"}, ADA)
    text = reply(world, done)["content"]
    assert "recorded 44.6 tok/s" in text and "`fast` was not recorded" in text
    with session_scope(world.sessions) as s:
        assert s.scalars(select(m.Number.value).where(m.Number.source == "entered")).all() == [44.6]
    shown = reply(world, fake.slash("numbers", ADA, options=sub("show")))["content"]
    assert "Day 2: your numbers" in shown and "Not yet:" in shown

    # Say it out loud: the prompt, an answer, a post with rating buttons, a peer's rating.
    asked = fake.slash("speak", ADA, options=sub("prompt"))
    shown = reply(world, asked)
    prompt = shown["content"]
    assert (
        "Say it out loud** (20 s)" in prompt and "Record yourself once and listen back." in prompt
    )
    # Said it under the prompt: timed from the prompt shown to the click, labelled as such.
    said = shown["components"][0]["components"][0]
    assert said["label"] == "Said it"
    time.sleep(1.2)
    text = reply(world, fake.click(shown["id"], said["custom_id"], ADA))["content"]
    assert " s from the prompt to your click" in text
    with session_scope(world.sessions) as s:
        spoken = s.scalars(select(m.SpokenAnswer)).one()
        assert spoken.timing == "prompt-to-click" and 1.2 <= (spoken.duration_s or 0) < 10
    it = fake.slash(
        "speak", ADA, options=sub("answer", opt("seconds", 18.5, 10), opt("rating", 4, 4))
    )
    assert "18.5 s of 20: in time" in reply(world, it)["content"]
    world.wait(lambda: it.followups, 10, "the answer's post in the channel")
    post = it.followups[-1]
    assert not post["flags"] & EPHEMERAL and "answered aloud in 18.5 s" in post["content"]
    four = post["components"][0]["components"][3]
    assert four["label"] == "4"
    rated = reply(world, fake.click(post["id"], four["custom_id"], BOB))["content"]
    assert "rated this answer 4/5" in rated
    with session_scope(world.sessions) as s:
        assert s.scalars(select(m.PeerRating.rating)).all() == [4]
    ada_post = post["id"]  # her answer in the channel: her deletion removes it
    it = fake.slash(
        "speak", BOB, options=sub("answer", opt("seconds", 15, 10), opt("rating", 3, 4))
    )
    reply(world, it)
    bob_post = world.wait(lambda: it.followups, 10, "Bob's answer in the channel")[-1]["id"]

    # /bench with no worker: acknowledged at once, then a clear answer.
    text = followed_up(world, fake.slash("bench", ADA, options=sub("run", opt("targets", "mlx"))))
    assert "no paired worker" in text["content"]

    # /worker pair: a one-time code, to Ada alone; the Mac redeems it.
    text = reply(world, fake.slash("worker", ADA, options=sub("pair", opt("name", "studio"))))
    code = re.search(r"`([0-9A-F-]{20})`", text["content"])
    assert code is not None
    key = new_private_key()
    with session_scope(world.sessions) as s:
        worker_id = redeem_pair_code(s, code.group(1), public_key_text(key)).id
    listed = reply(world, fake.slash("worker", ADA, options=sub("list")))["content"]
    assert "**studio**: offline" in listed

    # While she types the worker option, Discord asks for her machines.
    typing = {**opt("worker", "st"), "focused": True}
    it = fake.slash(
        "bench", ADA, options=sub("run", opt("targets", "mlx"), typing), autocomplete=True
    )
    resp = answered(world, it)
    assert resp["type"] == 8 and resp["data"]["choices"] == [{"name": "studio", "value": "studio"}]

    # /bench run: queued on her worker through the jobs service.
    text = followed_up(world, fake.slash("bench", ADA, options=sub("run", opt("targets", "mlx"))))
    assert re.search(r"Job \d+: mlx on studio, preset day2: queued", text["content"])

    def finish() -> int:
        with session_scope(world.sessions) as s:
            job = s.scalars(select(m.BenchJob).order_by(m.BenchJob.id.desc())).first()
            assert job is not None and job.status == "queued"
            # The worker's run took minutes: made that long before its result arrives.
            job.created_at -= timedelta(minutes=10)
            # Ada's machine is known, so her figure is checked against its speed limit (and
            # ranks); without it, it would be listed apart as unverified.
            ada = s.scalars(select(m.Member).where(m.Member.discord_id == ADA.id)).one()
            set_hardware(s, ada, chip="M4 Pro")
            set_server_model(s, ada, "mlx", "llama-3.1-8b-4bit", model_bytes="4.5GB")
            body = job_body(
                "day2", **{k: ROW[k] for k in ("model", "writing_tps_p50", "ttft_p50_s")}
            )
            body["record"] = job_record("day2", writing_tps=41.2, tpot_s=1 / 41.2)
            event = {
                "worker_id": worker_id,
                "kind": "result",
                "job_id": job.id,
                "attempt": job.attempt,
                "at": time.time(),
                "body": body,
            }
            assert ingest_event(s, sign(event, key)).accepted
            return job.id

    job_id = finish()
    posts = world.wait(
        lambda: [p for p in world.channel() if f"**Benchmark {job_id}**" in p["content"]],
        15,
        "the result in the channel",
    )
    [post] = posts
    assert f"<@{ADA.id}>" in post["content"] and "41.2" in post["content"]
    files = attachments(world, post)
    assert files[f"felab-job{job_id}.png"].startswith(b"\x89PNG")  # drawn by the ingest
    assert b"41.2" in files[f"felab-job{job_id}.csv"]
    time.sleep(1.0)  # several more looks at the outbox
    assert len([p for p in world.channel() if f"**Benchmark {job_id}**" in p["content"]]) == 1
    with session_scope(world.sessions) as s:
        assert s.scalar(select(func.count()).where(m.JobOutbox.posted_at.is_(None))) == 0
    status = reply(world, fake.slash("bench", ADA, options=sub("status")))["content"]
    assert f"{job_id}" in status and "done" in status

    # Private numbers: the next result goes to Ada alone.
    reply(world, fake.slash("me", ADA, options=sub("privacy", opt("public", False, 5))))
    followed_up(world, fake.slash("bench", ADA, options=sub("run", opt("targets", "mlx"))))
    second = finish()
    dm = world.wait(lambda: fake.dm_messages(ADA.id), 15, "the private result")
    assert f"**Benchmark {second}**" in dm[0]["content"]
    assert not [p for p in world.channel() if f"**Benchmark {second}**" in p["content"]]

    # Instructors only, checked when the command runs.
    refused = reply(world, fake.slash("leaderboard", BOB))["content"]
    assert refused == "only the cohort's instructors can do this"
    assert "Machine" in reply(world, fake.slash("me", BOB, options=sub("show")))["content"]
    with session_scope(world.sessions) as s:
        bob = s.scalars(select(m.Member).where(m.Member.discord_id == BOB.id)).one()
        bob.role = "instructor"
    progress = reply(world, fake.slash("progress", BOB))
    assert "ada" in progress["content"] and "progress.csv" in attachments(world, progress)
    board = reply(world, fake.slash("leaderboard", BOB, options=[opt("metric", "speed-mlx")]))
    assert "ada" in board["content"]  # private, but instructors see it
    assert b"41.2" in attachments(world, board)["leaderboard-speed-mlx.csv"]

    # /me: export as a file, then delete after the confirmation press.
    export = reply(world, fake.slash("me", ADA, options=sub("export")))
    exported = attachments(world, export)["felab-export.json"]
    assert b"44.6" in exported and f'"message_id": "{ada_post}"'.encode() in exported
    ask = reply(world, fake.slash("me", ADA, options=sub("delete")))
    confirm = ask["components"][0]["components"][0]
    assert confirm["label"] == "Delete everything"
    gone = reply(world, fake.click(ask["id"], confirm["custom_id"], ADA))
    assert gone["content"].startswith("Deleted everything")
    # Her spoken answer's post and her two benchmark results' posts.
    assert "Removed 3 of 3 messages felab posted about you." in gone["content"]
    assert ada_post in fake.deleted and ada_post not in fake.messages
    assert bob_post in fake.messages  # only hers
    with session_scope(world.sessions) as s:
        assert s.scalars(select(m.Member).where(m.Member.discord_id == ADA.id)).first() is None
        cohort_id = s.scalars(select(m.Member.cohort_id).where(m.Member.discord_id == BOB.id)).one()

    # Deleted from a terminal: the bot removes Bob's answer from the channel at its next look.
    out = subprocess.run(
        [FELAB, "numbers", "delete", "--member", BOB.id, "--cohort", str(cohort_id), "--yes"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "The bot removes the 1 message it posted about them in Discord" in out.stdout
    world.wait(lambda: bob_post in fake.deleted, 10, "the bot to remove Bob's answer")
    with session_scope(world.sessions) as s:
        assert s.scalar(select(func.count(m.ChatPost.id))) == 0

    # /setup in another channel: a new cohort there, its maker the instructor.
    other = "700000000000000011"
    made = reply(
        world,
        fake.slash(
            "setup",
            BOB,
            options=sub(
                "cohort",
                opt("name", "Autumn"),
                opt("timezone", "Europe/Paris"),
                opt("start_date", "2026-09-07"),
            ),
            channel_id=other,
        ),
    )["content"]
    assert made.startswith("Cohort **Autumn** runs in this channel")
    with session_scope(world.sessions) as s:
        autumn = s.scalars(select(m.Cohort).where(m.Cohort.channel_id == other)).one()
        assert [(x.discord_id, x.role) for x in autumn.members] == [(BOB.id, "instructor")]

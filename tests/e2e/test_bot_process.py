"""The real, unmodified bot process (`felab bot`) against the fake Discord API, end to end.

The bot is pointed at the fake by its environment only (FELAB_DISCORD_API_URL; it asks the
fake's /gateway/bot for the gateway). Each process runs in its own process group with a
deadline and is killed at teardown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from felab_core.content.store import load_folder
from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.people.members import create_cohort
from tests.fakediscord import FakeDiscord, User

ROOT = Path(__file__).resolve().parents[2]
FELAB = str(Path(sys.executable).with_name("felab"))
ADA = User("100000000000001001", "ada")
BOB = User("100000000000001002", "bob")
EPHEMERAL = 64
DEADLINE_S = 240  # no bot outlives its test, even if teardown never runs


@dataclass
class BotWorld:
    fake: FakeDiscord
    tmp: Path
    db_url: str
    sessions: sessionmaker[Session]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
        env.update(
            PYTHONUNBUFFERED="1",
            FELAB_DISCORD_TOKEN=self.fake.token,
            FELAB_DISCORD_API_URL=self.fake.api_url,
            FELAB_DATABASE_URL=self.db_url,
            FELAB_DATA_DIR=str(self.tmp / "data"),
            FELAB_DISCORD_POST_EVERY_S="0.3",
        )
        return env

    def start_bot(self) -> subprocess.Popen[bytes]:
        log = (self.tmp / "bot.log").open("ab")
        proc = subprocess.Popen(
            ["timeout", "-s", "KILL", str(DEADLINE_S), FELAB, "bot"],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def log(self) -> str:
        path = self.tmp / "bot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait(self, pred: Any, timeout: float, what: str) -> Any:
        try:
            return self.fake.wait_for(pred, timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- bot log ---\n{self.log()[-4000:]}") from None

    def channel(self) -> list[dict[str, Any]]:
        return self.fake.channel_messages(self.fake.channel_ids[0])

    def messages_with(self, prefix: str) -> list[dict[str, Any]]:
        """The channel's messages whose first button's custom id starts with `prefix`."""
        return [
            msg
            for msg in self.channel()
            if msg["components"]
            and msg["components"][0]["components"][0]["custom_id"].startswith(prefix)
        ]

    def card_messages(self) -> list[dict[str, Any]]:
        return self.messages_with("felab:card:")

    def day_extras(self) -> int:
        """Day 2's say-it-aloud prompts and whiteboards: one message each after the cards."""
        with session_scope(self.sessions) as s:
            prompts = s.scalar(
                select(func.count(m.SpeakPrompt.id))
                .join(m.ContentDay)
                .where(m.ContentDay.number == 2, m.SpeakPrompt.retired.is_(False))
            )
            boards = s.scalar(
                select(func.count(m.DrillItem.id))
                .join(m.ContentDay)
                .where(m.ContentDay.number == 2, m.DrillItem.retired.is_(False))
            )
        return (prompts or 0) + (boards or 0)

    def day_cards(self) -> int:
        with session_scope(self.sessions) as s:
            return (
                s.scalar(
                    select(func.count(m.Card.id))
                    .join(m.ContentDay)
                    .where(m.ContentDay.number == 2, m.Card.retired.is_(False))
                )
                or 0
            )

    def post_done(self) -> bool:
        """The day's post is recorded as sent and every card, prompt and whiteboard message is
        in the channel."""
        with session_scope(self.sessions) as s:
            sent = s.scalar(select(func.count(m.Post.id)).where(m.Post.posted_at.is_not(None)))
        with_buttons = [msg for msg in self.channel() if msg["components"]]
        return sent == 1 and len(with_buttons) == self.day_cards() + self.day_extras()

    def reviews(self, user: User) -> list[m.Review]:
        with session_scope(self.sessions) as s:
            return list(
                s.scalars(
                    select(m.Review)
                    .join(m.Member, m.Member.id == m.Review.member_id)
                    .where(m.Member.discord_id == user.id)
                )
            )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[BotWorld]:
    db_url = f"sqlite:///{tmp_path / 'felab.db'}"
    engine = make_engine(db_url)
    upgrade(engine)
    sessions = session_factory(engine)
    fake = FakeDiscord().start()
    with session_scope(sessions) as s:
        load_folder(s, ROOT / "content")
        # Day 2 (the pack the repository ships) today, its post time long past: due at start.
        create_cohort(
            s,
            "Spring",
            timezone="UTC",
            start_date=datetime.now(UTC).date() - timedelta(days=1),
            post_time=dtime(0, 0),
            guild_id=fake.guild_id,
            channel_id=fake.channel_ids[0],
        )
    w = BotWorld(fake, tmp_path, db_url, sessions)
    try:
        yield w
    finally:
        for proc in w.procs:
            w.kill(proc)
        fake.stop()
        engine.dispose()


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """action -> custom id of a card message's buttons."""
    out = {}
    for row in message["components"]:
        for item in row["components"]:
            out[item["custom_id"].rsplit(":", 1)[1]] = item["custom_id"]
    return out


def answered(world: BotWorld, it: Any) -> dict[str, Any]:
    world.wait(lambda: it.responded_at is not None, 5, "the bot's answer to an interaction")
    assert it.responded_at - it.created < 3.0
    assert it.response is not None
    return dict(it.response)


def test_bot_end_to_end(world: BotWorld) -> None:
    fake = world.fake
    # Commands are synced on purpose, by its own command.
    out = subprocess.run(
        [FELAB, "bot", "sync", "--guild", fake.guild_id],
        env=world.env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    assert "drill" in out.stdout
    assert "drill" in [c["name"] for c in fake.commands[fake.guild_id]]
    synced = len(fake.recorded("PUT", r"/commands$"))

    # The first message the bot sends is rate-limited once: it waits and sends it once.
    fake.rate_limit("POST", r"/channels/\d+/messages$", times=1, retry_after=0.4)
    bot = world.start_bot()
    world.wait(fake.connected, 20, "the bot to log in and identify")
    assert fake.recorded("GET", r"/users/@me$") and fake.recorded("GET", r"/gateway/bot$")
    world.wait(world.post_done, 20, "the daily post and its card messages")
    header = world.channel()[0]
    cards = world.card_messages()
    assert header["content"].startswith("**Day 2: Wrap-up and drill**")
    posts = fake.recorded("POST", r"/channels/\d+/messages$")
    assert [r.status for r in posts[:2]] == [429, 200]
    with session_scope(world.sessions) as s:
        post = s.scalars(select(m.Post)).one()
        assert post.message_id == header["id"] and post.posted_at is not None
    assert len(cards) == world.day_cards() >= 2
    for card in cards:
        ids = buttons(card)
        assert list(ids) == ["reveal", "again", "hard", "good", "easy"]
        assert all(len(i) <= 100 for i in ids.values())
    labels = [item["label"] for item in cards[0]["components"][0]["components"]]
    assert "Hard: got it, with effort" in labels

    # Reveal: an ephemeral plain answer and the engineer version, within 3 s.
    first = cards[0]
    resp = answered(world, fake.click(first["id"], buttons(first)["reveal"], ADA))
    assert resp["type"] == 4 and resp["data"]["flags"] & EPHEMERAL
    assert "In plain words" in resp["data"]["content"]
    assert "Engineer version" in resp["data"]["content"]

    # Rate: a double click records one review.
    one = fake.click(first["id"], buttons(first)["hard"], ADA)
    two = fake.click(first["id"], buttons(first)["hard"], ADA)
    texts = sorted(answered(world, it)["data"]["content"] for it in (one, two))
    assert texts[0].startswith("Already rated") and texts[1].startswith("Recorded **Hard")
    reviews = world.reviews(ADA)
    assert [(r.rating, r.source) for r in reviews] == [(2, "discord")]

    # Another student's slash command, answered within 3 s with their first card's buttons.
    resp = answered(world, fake.slash("drill", BOB))
    assert resp["data"]["flags"] & EPHEMERAL
    assert "ready for you now" in resp["data"]["content"]
    assert buttons(resp["data"])["good"].startswith("felab:card:")

    # Discord asks for a reconnect: the bot resumes its session and still answers.
    fake.ask_reconnect()
    world.wait(lambda: fake.resumes, 10, "the bot to RESUME after op 7")
    assert len(fake.identifies) == 1 and fake.heartbeats >= 1
    world.wait(fake.connected, 10, "the resumed connection")
    second = cards[-1]
    resp = answered(world, fake.click(second["id"], buttons(second)["easy"], ADA))
    assert resp["data"]["content"].startswith("Recorded **Easy")

    # Starting the bot synced nothing; the bot is still running.
    assert len(fake.recorded("PUT", r"/commands$")) == synced
    assert bot.poll() is None, world.log()


def test_bot_restart_keeps_buttons_and_posts_once(world: BotWorld) -> None:
    fake = world.fake
    first_bot = world.start_bot()
    world.wait(world.post_done, 30, "the daily post")
    before = len(world.channel())
    world.kill(first_bot)

    world.start_bot()
    world.wait(lambda: len(fake.identifies) >= 2, 30, "the restarted bot to identify")
    time.sleep(1.5)  # several looks for due posts (every 0.3 s)
    assert len(world.channel()) == before  # the day's post was not made twice
    with session_scope(world.sessions) as s:
        assert s.scalar(select(func.count(m.Post.id))) == 1

    old = world.card_messages()[-1]
    resp = answered(world, fake.click(old["id"], buttons(old)["good"], ADA))
    assert resp["data"]["content"].startswith("Recorded **Good")
    assert [r.rating for r in world.reviews(ADA)] == [3]


def test_global_sync_bad_token_and_unknown_guild(world: BotWorld) -> None:
    def sync(env: dict[str, str], guild: str | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FELAB, "bot", "sync", *(["--guild", guild] if guild else [])],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )

    bad = sync({**world.env(), "FELAB_DISCORD_TOKEN": "not-the-token"}, world.fake.guild_id)
    assert bad.returncode == 2 and "Discord refused the token" in bad.stderr
    assert "Traceback" not in bad.stderr
    other = sync(world.env(), "123456789012345678")
    assert other.returncode == 2 and "applications.commands" in other.stderr
    assert world.fake.commands == {}
    done = sync(world.env(), None)
    assert done.returncode == 0, done.stderr
    assert "every guild (global)" in done.stdout
    assert "drill" in [c["name"] for c in world.fake.commands["global"]]
    assert world.fake.recorded("PUT", r"/applications/\d+/commands$")

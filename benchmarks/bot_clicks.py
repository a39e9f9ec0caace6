"""How quickly does the real bot answer a button press, alone and in a burst?

The fake Discord (tests/fakediscord) on loopback, the real `felab bot` process against it, the
embedded SQLite database (or --database-url), Day 2's daily post. A click is an
INTERACTION_CREATE the fake sends; its latency is the time from that event leaving the fake to
the bot's first response (the interaction callback) arriving there, on the fake's one clock.

- single clicks: one at a time, each a new member rating a card ("Good": joins the open cohort
  and records a review, the write path), then as many "Reveal" presses (a read);
- burst: 1,000 members press "Good" at once; how many were answered within 1 s and 3 s (the
  fake refuses a first response after Discord's 3 s, so a late one counts as unanswered);
- the daily post to --cohorts cohorts (100), each in its own channel, all due at the same
  minute: the time from the bot's start to the last message of the last cohort, and the 429s.

The fake models Discord's limits (tests/fakediscord, `discord_limits`): 50 requests a second for
the bot (interaction answers exempt) and 5 messages per 5 s per channel, with 429s counted.

    .venv/bin/python benchmarks/bot_clicks.py [--clicks 60] [--burst 1000] [--cohorts 100]
Writes benchmarks/results/bot_clicks.json and prints a Markdown table for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import func, select  # noqa: E402

from felab_core.content.store import load_folder  # noqa: E402
from felab_core.db import models as m  # noqa: E402
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade  # noqa: E402
from felab_core.people.members import create_cohort  # noqa: E402
from tests.fakediscord import FakeDiscord, User  # noqa: E402
from tests.fakediscord.server import Interaction  # noqa: E402

FELAB = str(Path(sys.executable).with_name("felab"))


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bot_pid(wrapper: int) -> int:
    """The `felab bot` process under the `timeout` that starts it."""
    children = Path(f"/proc/{wrapper}/task/{wrapper}/children").read_text().split()
    return int(children[0]) if children else wrapper


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(pct(ms, 0.5), 1),
        "p95_ms": round(pct(ms, 0.95), 1),
        "max_ms": round(max(ms), 1),
    }


def latency_ms(it: Interaction) -> float | None:
    return None if it.responded_at is None else (it.responded_at - it.created) * 1000


def wait(pred: Any, timeout: float, what: str, log: Path) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.01)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise SystemExit(f"timed out waiting for {what}\n--- bot log ---\n{tail}")


def custom_id(message: dict[str, Any], action: str) -> str:
    for row in message["components"]:
        for item in row["components"]:
            if item["custom_id"].endswith(f":{action}"):
                return str(item["custom_id"])
    raise SystemExit(f"no {action} button")


def _rates(message: dict[str, Any]) -> bool:
    return any(
        str(item.get("custom_id", "")).endswith(":good")
        for row in message.get("components") or []
        for item in row.get("components") or []
    )


def run(clicks: int, burst: int, cohorts: int, database_url: str | None) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="felab-bot-clicks-"))
    db_url = database_url or f"sqlite:///{tmp / 'felab.db'}"
    engine = make_engine(db_url)
    upgrade(engine)
    sessions = session_factory(engine)
    # channels of this run only: a --database-url kept from an earlier run holds its cohorts
    first = 700000000000000000 + (time.time_ns() // 1000 % 10**11) * 1000
    channels = tuple(str(first + i) for i in range(cohorts))
    fake = FakeDiscord(channel_ids=channels, discord_limits=True).start()
    with session_scope(sessions) as s:
        load_folder(s, ROOT / "content")
        for i, channel in enumerate(channels):  # all due now: the first look posts them all
            create_cohort(
                s,
                f"Bench {int(time.time())} #{i}",
                timezone="UTC",
                start_date=datetime.now(UTC).date() - timedelta(days=1),
                post_time=dtime(0, 0),
                guild_id=fake.guild_id,
                channel_id=channel,
            )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
    env.update(
        PYTHONUNBUFFERED="1",
        FELAB_DISCORD_TOKEN=fake.token,
        FELAB_DISCORD_API_URL=fake.api_url,
        FELAB_DATABASE_URL=db_url,
        FELAB_DATA_DIR=str(tmp / "data"),
        FELAB_DISCORD_POST_EVERY_S="0.5",
    )
    log = tmp / "bot.log"
    proc = subprocess.Popen(
        ["timeout", "-s", "KILL", "600", FELAB, "bot"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=ROOT,
    )
    started = time.monotonic()
    try:
        wait(fake.connected, 30, "the bot to connect", log)
        with session_scope(sessions) as s:
            n_cards = s.scalar(
                select(func.count(m.Card.id))
                .join(m.ContentDay)
                .where(m.ContentDay.number == 2, m.Card.retired.is_(False))
            )

        def cards() -> list[dict[str, Any]]:
            """The drill cards of the post: the messages with a rating button (the say-it
            prompt and the whiteboards have buttons of their own)."""
            return [x for x in fake.channel_messages(fake.channel_ids[0]) if _rates(x)]

        def posted(channel: str) -> int:
            return sum(1 for x in fake.channel_messages(channel) if _rates(x))

        connected = time.monotonic()
        wait(lambda: all(posted(c) == n_cards for c in channels), 240, "every daily post", log)
        last_post = max(
            r.at for r in fake.recorded("POST", r"/channels/\d+/messages$") if r.status == 200
        )
        daily = {
            "cohorts": cohorts,
            "messages": sum(len(fake.channel_messages(c)) for c in channels),
            "from_start_s": round(last_post - started, 1),
            "from_connect_s": round(last_post - connected, 1),
            "too_many_429": fake.too_many,
        }
        card = cards()[0]
        good, reveal = custom_id(card, "good"), custom_id(card, "reveal")
        time.sleep(1.0)  # let the post loop settle

        def one(cid: str, user: User) -> float:
            it = fake.click(card["id"], cid, user)
            wait(lambda: it.responded_at is not None, 5, "an answer", log)
            value = latency_ms(it)
            assert value is not None
            return value

        # Warm-up (first imports, first connection): not counted.
        for i in range(3):
            one(good, User(str(200000000000000000 + i), f"warm{i}"))
        rate_ms = [one(good, User(str(300000000000000000 + i), f"m{i}")) for i in range(clicks)]
        reveal_ms = [one(reveal, User(str(300000000000000000 + i), f"m{i}")) for i in range(clicks)]
        time.sleep(0.5)

        users = [User(str(400000000000000000 + i), f"b{i}") for i in range(burst)]
        bot = bot_pid(proc.pid)
        bot_cpu_before, here_cpu_before = cpu_s(bot), time.process_time()
        made = fake.click_burst([(card["id"], good, u) for u in users])
        end = time.monotonic() + 5
        while time.monotonic() < end and any(it.responded_at is None for it in made):
            time.sleep(0.02)
        answered = [x for x in (latency_ms(it) for it in made) if x is not None]

        def followups() -> dict[str, float]:
            return {
                r.path.rsplit("/", 1)[1]: r.at
                for r in fake.recorded("POST", r"/webhooks/\d+/[^/]+$")
                if r.status == 200
            }

        deferred = {it.token for it in made if (it.response or {}).get("type") == 5}
        end = time.monotonic() + 15  # the followups of the presses acknowledged first
        while time.monotonic() < end and not deferred <= set(followups()):
            time.sleep(0.02)
        followup_at = followups()
        bot_cpu, here_cpu = cpu_s(bot) - bot_cpu_before, time.process_time() - here_cpu_before
        complete = [
            (
                (it.responded_at if (it.response or {}).get("type") == 4 else followup_at[it.token])
                - it.created
            )
            * 1000
            for it in made
            if it.responded_at is not None
            and ((it.response or {}).get("type") == 4 or it.token in followup_at)
        ]
        with session_scope(sessions) as s:
            reviews = s.scalar(select(func.count(m.Review.id)))
        return {
            "daily_post": daily,
            "too_many_429_in_all": fake.too_many,
            "date": datetime.now(UTC).date().isoformat(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
            "database": db_url.split(":", 1)[0],
            "single_rate": {"clicks": clicks, **summary(rate_ms)},
            "single_reveal": {"clicks": clicks, **summary(reveal_ms)},
            "burst": {
                "clicks": burst,
                "answered": len(answered),
                "within_1s": sum(1 for x in answered if x <= 1000),
                "within_3s": sum(1 for x in answered if x <= 3000),
                "deferred": sum(1 for it in made if (it.response or {}).get("type") == 5),
                **(summary(answered) if answered else {}),
                "full_answer": {"count": len(complete), **(summary(complete) if complete else {})},
                # What the burst cost: the bot's CPU per press bounds how many one core can
                # answer in a second, whatever else the machine runs.
                "bot_cpu_s": round(bot_cpu, 2),
                "bot_cpu_ms_per_press": round(bot_cpu * 1000 / max(1, burst), 2),
                "fake_and_benchmark_cpu_s": round(here_cpu, 2),
            },
            "reviews_recorded": reviews,
        }
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        fake.stop()
        engine.dispose()


def table(r: dict[str, Any]) -> str:
    b, d = r["burst"], r["daily_post"]
    return "\n".join(
        [
            f"Daily post to {d['cohorts']} cohorts ({d['messages']} messages): the last one "
            f"{d['from_connect_s']} s after the bot connected ({d['from_start_s']} s after its "
            f"start); 429s: {d['too_many_429']} (all run: {r['too_many_429_in_all']}).",
            "",
            "| clicks | first response p50 / p95 / max | answered within 1 s / 3 s |",
            "|---|---:|---:|",
            f"| one at a time, Good (a review written), {r['single_rate']['clicks']} "
            f"| {r['single_rate']['p50_ms']} / {r['single_rate']['p95_ms']} / "
            f"{r['single_rate']['max_ms']} ms | |",
            f"| one at a time, Reveal (a read), {r['single_reveal']['clicks']} "
            f"| {r['single_reveal']['p50_ms']} / {r['single_reveal']['p95_ms']} / "
            f"{r['single_reveal']['max_ms']} ms | |",
            f"| {b['clicks']} members press Good at once "
            f"| {b.get('p50_ms')} / {b.get('p95_ms')} / {b.get('max_ms')} ms "
            f"| {b['within_1s']} / {b['within_3s']} of {b['clicks']} |",
            f"| the same burst, to the full answer ({b['deferred']} acknowledged first) "
            f"| {b['full_answer'].get('p50_ms')} / {b['full_answer'].get('p95_ms')} / "
            f"{b['full_answer'].get('max_ms')} ms | |",
            "",
            f"The burst cost the bot {b.get('bot_cpu_s')} s of CPU, "
            f"{b.get('bot_cpu_ms_per_press')} ms a press (the fake and this script: "
            f"{b.get('fake_and_benchmark_cpu_s')} s).",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clicks", type=int, default=60)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--cohorts", type=int, default=100, help="cohorts, each its channel")
    ap.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bot_clicks.json")
    ap.add_argument("--quick", action="store_true", help="5 clicks, a burst of 10: does it run?")
    args = ap.parse_args()
    if args.quick:
        args.clicks, args.burst, args.cohorts = 5, 10, 3
    result = run(args.clicks, args.burst, args.cohorts, args.database_url)
    if not args.quick:  # a smoke run's figures are not the ones the docs quote
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print()
    print(table(result))


if __name__ == "__main__":
    main()

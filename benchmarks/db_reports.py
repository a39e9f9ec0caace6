"""How fast are the reports on a full cohort? PostgreSQL filled with one cohort of 5,000 members
and 1,000,000 reviews, then the service calls the bot makes, each timed many times.

Timed (each in a fresh session, as a bot command would be): the leaderboards (streak, reviews,
retention, best measured speed), one member's progress report, the whole cohort's progress
table (5,000 rows) and one member's "cards due today". The goal is a median under 200 ms each.

The data is made to look like a course run: 10 days of 4 cards, members in six time zones, about
200 reviews each spread over 60 days, card states for every card seen (some overdue), three
measured writing speeds per member, and the per-member counters each rating keeps (built with
the same fold the service uses). It goes into its own schema, dropped at the end (--keep keeps
it).

    .venv/bin/python benchmarks/db_reports.py                 # full size, ~1-2 minutes
    .venv/bin/python benchmarks/db_reports.py --members 500 --reviews 100000   # a smoke run
Writes benchmarks/results/db_reports.json and prints a Markdown table for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, upgrade
from felab_core.drills.review import _streak_step, cards_due, end_of_local_day
from felab_core.people.members import create_cohort
from felab_core.reports.leaderboard import leaderboard, speed_boards
from felab_core.reports.progress import cohort_progress, member_progress
from felab_core.reports.weekly import weekly_summary

HERE = Path(__file__).parent
ZONES = (
    "Europe/London",
    "America/New_York",
    "America/Los_Angeles",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Australia/Sydney",
)
DAYS, CARDS_PER_DAY = 10, 4
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
START = date(2026, 3, 2)


def _fill(
    session: Session, members: int, reviews: int, seed: int, cohorts: int = 1
) -> dict[str, Any]:
    """The content once, then `cohorts` cohorts of `members` members and `reviews` reviews each."""
    card_ids = _fill_content(session)
    filled: dict[str, Any] = {}
    t0 = time.perf_counter()
    for c in range(cohorts):
        one = _fill_cohort(session, card_ids, c, members, reviews, seed + c)
        if c == cohorts // 2 or not filled:  # time the reports on a cohort in the middle
            filled = one
        if cohorts > 1 and (c + 1) % 10 == 0:
            print(f"  filled {c + 1} of {cohorts} cohorts ({time.perf_counter() - t0:.0f} s)")
    session.execute(text("ANALYZE"))
    session.commit()
    return filled


def _fill_content(session: Session) -> list[tuple[int, int]]:
    pack = m.ContentPack(key="bench.pack", title="bench", source_path="-", checksum="-")
    session.add(pack)
    session.flush()
    card_ids: list[tuple[int, int]] = []  # (card id, day number)
    for d in range(1, DAYS + 1):
        day = m.ContentDay(pack_id=pack.id, number=d, title=f"Day {d}", done_when={})
        session.add(day)
        session.flush()
        for p in range(CARDS_PER_DAY):
            card = m.Card(
                key=f"bench.d{d:02}.c{p}", day_id=day.id, position=p, question="Q", answer="A"
            )
            session.add(card)
            session.flush()
            card_ids.append((card.id, d))
    session.commit()
    return card_ids


def _fill_cohort(
    session: Session, card_ids: list[tuple[int, int]], c: int, members: int, reviews: int, seed: int
) -> dict[str, Any]:
    """One cohort: its members, card states, reviews and numbers (COPY for bulk)."""
    rng = random.Random(seed)
    cohort = create_cohort(
        session,
        f"Bench {c}",
        timezone="UTC",
        start_date=START,
        guild_id=f"bench{c}",
        channel_id=f"bench{c}",
    )
    session.commit()
    raw = session.connection().connection.driver_connection
    assert raw is not None
    per_member = reviews // members
    extra = reviews - per_member * members
    member_rows = []
    for i in range(members):
        member_rows.append(
            (
                cohort.id,
                str(100_000 + c * 1_000_000 + i),
                f"student {i:04}",
                "student",
                ZONES[i % len(ZONES)],
                NOW.isoformat(),
                i % 10 != 0,
            )
        )
    with raw.cursor() as cur:
        with cur.copy(
            "COPY members (cohort_id, discord_id, display_name, role, timezone, joined_at, "
            "public_numbers) FROM STDIN"
        ) as copy:
            for row in member_rows:
                copy.write_row(row)
        cur.execute("SELECT id FROM members WHERE cohort_id = %s ORDER BY id", (cohort.id,))
        member_ids = [r[0] for r in cur.fetchall()]

    stats: list[tuple[int, int, date | None, int, int, int, int]] = []
    t0 = time.perf_counter()
    with raw.cursor() as cur:
        with cur.copy(
            "COPY reviews (member_id, card_id, rating, reviewed_at, local_day, state_before, "
            "due_after, duration_ms, source) FROM STDIN"
        ) as rcopy:
            state_rows = []
            for idx, mid in enumerate(member_ids):
                n = per_member + (1 if idx < extra else 0)
                active_days = sorted(rng.sample(range(60), k=min(60, max(1, n // 4))))
                # A third of members are still going today; the rest stopped a while ago.
                if idx % 3 == 0:
                    shift = 60 - 1 - active_days[-1]
                    active_days = [d + shift for d in active_days]
                seen: dict[int, int] = {}
                cur_s, best, last = 0, 0, None
                total = tries = recalled = 0
                for k in range(n):
                    offset = active_days[k * len(active_days) // n]
                    when = NOW - timedelta(days=59 - offset, minutes=rng.randint(0, 600))
                    local = when.date()
                    card_id, _day = card_ids[k % len(card_ids)]
                    before = 0 if card_id not in seen else 2
                    rating = 1 if rng.random() < 0.15 else rng.choice((2, 3, 3, 3, 4))
                    seen[card_id] = seen.get(card_id, 0) + 1
                    rcopy.write_row(
                        (
                            mid,
                            card_id,
                            rating,
                            when,
                            local,
                            before,
                            when + timedelta(days=3),
                            rng.randint(2000, 20000),
                            "bench",
                        )
                    )
                    cur_s, best, last = _streak_step(cur_s, best, last, local)
                    total += 1
                    if before:
                        tries += 1
                        recalled += rating > 1
                stats.append((mid, cur_s, last, best, total, tries, recalled))
                for card_id, reps in seen.items():
                    due = NOW + timedelta(hours=rng.randint(-96, 24 * 20))
                    state_rows.append(
                        (mid, card_id, 2, None, 5.0, 5.0, due, due - timedelta(days=3), reps, 0)
                    )
        with cur.copy(
            "COPY card_states (member_id, card_id, state, step, stability, difficulty, due, "
            "last_review, reps, lapses) FROM STDIN"
        ) as scopy:
            for row in state_rows:
                scopy.write_row(row)
        cur.execute(
            "CREATE TEMP TABLE s (id int, c int, l date, b int, t int, tr int, r int) "
            "ON COMMIT DROP"
        )
        with cur.copy("COPY s FROM STDIN") as copy:
            for row in stats:
                copy.write_row(row)
        cur.execute(
            "UPDATE members SET streak_current = s.c, last_review_day = s.l, streak_best = s.b, "
            "reviews_total = s.t, recall_tries = s.tr, recalled = s.r "
            "FROM s WHERE members.id = s.id"
        )
        # Three measured Day 2 runs per member: the jobs and the numbers they gave.
        cur.execute(
            "INSERT INTO bench_jobs (member_id, server, preset, status, created_at, finished_at) "
            "SELECT id, srv, 'day2', 'ready', %s, %s FROM members, "
            "unnest(ARRAY['ollama','llamacpp','mlx']) AS srv WHERE cohort_id = %s",
            (NOW, NOW, cohort.id),
        )
        cur.execute(
            "INSERT INTO numbers (member_id, server, metric, value, unit, source, model, preset, "
            "job_id, recorded_at) SELECT member_id, server, 'writing_tps', 30 + random() * 40, "
            "'tokens/s', 'measured', CASE WHEN member_id %% 4 = 0 THEN 'llama-3.2-3b' ELSE "
            "'llama-3.1-8b' END, preset, bench_jobs.id, created_at FROM bench_jobs JOIN members "
            "ON members.id = bench_jobs.member_id WHERE members.cohort_id = %s",
            (cohort.id,),
        )
    raw.commit()
    fill_s = time.perf_counter() - t0
    return {"cohort_id": cohort.id, "member_ids": member_ids, "fill_s": fill_s}


def _time(fn: Callable[[], object], runs: int) -> dict[str, float]:
    fn()  # warm the plan and the cache once, as a running bot would be
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {
        "median_ms": statistics.median(samples),
        "p95_ms": samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))],
        "max_ms": samples[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--members", type=int, default=5000)
    parser.add_argument("--reviews", type=int, default=1_000_000, help="per cohort")
    parser.add_argument(
        "--cohorts", type=int, default=1, help="cohorts of --members each (100 x 500: 10x)"
    )
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the schema afterwards")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "db_reports.json")
    parser.add_argument(
        "--quick", action="store_true", help="100 members, 5,000 reviews, 3 runs: does it run?"
    )
    args = parser.parse_args()
    if args.quick:
        args.members, args.reviews, args.runs = 100, 5000, 3

    schema = f"felab_bench_{os.getpid()}" if args.quick else "felab_bench"
    admin = make_engine(args.url)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    url = make_url(args.url).update_query_dict({"options": f"-csearch_path={schema}"})
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        upgrade(engine)
        factory = session_factory(engine)
        t0 = time.perf_counter()
        with factory() as session:
            filled = _fill(session, args.members, args.reviews, args.seed, args.cohorts)
        fill_total = time.perf_counter() - t0
        cohort_id = filled["cohort_id"]
        # A member still drilling (member ids divisible by 3 after the first are active).
        member_id = filled["member_ids"][3]
        with engine.connect() as conn:
            counts = {
                t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in ("members", "reviews", "card_states", "numbers")
            }

        def in_session(fn: Callable[[Session], object]) -> Callable[[], object]:
            def run() -> object:
                with factory() as s:
                    return fn(s)

            return run

        def progress(s: Session) -> object:
            member = s.get(m.Member, member_id)
            assert member is not None
            return member_progress(s, member, NOW)

        def due(s: Session) -> object:
            member = s.get(m.Member, member_id)
            assert member is not None
            return cards_due(s, member, NOW, until=end_of_local_day(NOW, member.timezone))

        def weekly(s: Session) -> object:
            cohort = s.get(m.Cohort, cohort_id)
            assert cohort is not None
            return weekly_summary(s, cohort, NOW)

        cases: dict[str, Callable[[Session], object]] = {
            "leaderboard: streak": lambda s: leaderboard(s, cohort_id, "streak", NOW),
            "leaderboard: reviews": lambda s: leaderboard(s, cohort_id, "reviews", NOW),
            "leaderboard: retention": lambda s: leaderboard(s, cohort_id, "retention", NOW),
            "leaderboard: best mlx speed (measured)": lambda s: speed_boards(s, cohort_id, "mlx"),
            "progress report, one member": progress,
            "cards due today, one member": due,
            f"progress table, whole cohort ({args.members:,} rows)": lambda s: cohort_progress(
                s, cohort_id, NOW
            ),
            "weekly summary, one cohort": weekly,
        }
        results = {name: _time(in_session(fn), args.runs) for name, fn in cases.items()}
        with factory() as s:
            member = s.get(m.Member, member_id)
            assert member is not None
            sample_due = len(due(s))  # type: ignore[arg-type]
    finally:
        engine.dispose()
        if not args.keep:
            with admin.begin() as conn:
                conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()

    with admin.connect() as conn:
        pg_version = conn.execute(text("SHOW server_version")).scalar_one()
    admin.dispose()
    record = {
        "cohorts": args.cohorts,
        "rows": counts,
        "fill_seconds": round(fill_total, 1),
        "runs": args.runs,
        "cards_due_for_sampled_member": sample_due,
        "postgresql": pg_version,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "results_ms": {k: {kk: round(vv, 2) for kk, vv in v.items()} for k, v in results.items()},
    }
    if args.cohorts > 1 and args.json.name == "db_reports.json":
        args.json = args.json.with_name("db_reports_cohorts.json")  # keep the one-cohort figures
    if not args.quick:  # a smoke run's figures are not the ones the docs quote
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"PostgreSQL {pg_version}: {args.cohorts} cohort(s), {counts['members']:,} members, "
        f"{counts['reviews']:,} reviews, "
        f"{counts['card_states']:,} card states, {counts['numbers']:,} numbers "
        f"(filled in {fill_total:.0f} s); {args.runs} runs each after one warm-up.\n"
    )
    print("| call | median | p95 | max |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['median_ms']:.1f} ms | {r['p95_ms']:.1f} ms | {r['max_ms']:.1f} ms |")


if __name__ == "__main__":
    main()

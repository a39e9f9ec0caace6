"""Migration 0015 (sweep 22 b B2): figures an older felab stored 'ok' with no speed limit behind
them (no chip, no model size) become 'unverified' with speed_limit_for's words, leave the
boards, are listed apart, and are judged again once the member sets what was missing; figures
with a limit behind them keep their verdict. On SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.session import upgrade
from felab_core.numbers.recording import speed_limit_for
from felab_core.numbers.verdict import rejudge_waiting
from felab_core.people.members import set_hardware, set_server_model
from felab_core.reports.leaderboard import speed_boards, unranked

_MEMBER = (
    "INSERT INTO members (id, cohort_id, discord_id, display_name, role, timezone, chip, "
    "bandwidth_gb_s, joined_at, streak_current, streak_best, reviews_total, recall_tries, "
    "recalled) VALUES (:id, 1, :did, :name, 'student', 'UTC', :chip, :bw, "
    "'2026-03-01 10:00:00', 0, 0, 0, 0, 0)"
)
#: (id, name, chip, bandwidth GB/s): no machine, a chip, a bandwidth, '' and 0 (none either).
MEMBERS = [
    (1, "Nomachine", None, None),
    (2, "Chip", "M4 Pro", None),
    (3, "Bandwidth", None, 273.0),
    (4, "Blank", "", 0.0),
]
#: (member, server, model, size): Chip and Bandwidth know ollama's size, not mlx's.
SERVERS = [
    (1, "ollama", "llama3.1:8b", 4_900_000_000),
    (2, "ollama", "llama3.1:8b", 4_900_000_000),
    (2, "mlx", "llama-3.1-8b-4bit", None),
    (3, "ollama", "llama3.1:8b", 4_900_000_000),
]
#: (id, member, server, source, model, value, verdict, metric)
NUMBERS = [
    (1, 1, "ollama", "entered", None, 9000.0, "ok", "writing_tps"),  # no machine: unranked
    (2, 2, "ollama", "entered", None, 44.6, "ok", "writing_tps"),  # a limit: kept
    (3, 2, "mlx", "entered", None, 50.0, "ok", "writing_tps"),  # no size: unranked
    (4, 3, "ollama", "entered", None, 40.0, "ok", "writing_tps"),  # bandwidth: kept
    (5, 4, "ollama", "entered", None, 30.0, "ok", "writing_tps"),  # '' and 0: unranked
    (6, 1, "ollama", "measured", "llama3.1:8b", 45.0, "ok", "writing_tps"),  # pre-0007: too
    (7, 2, "mlx", "measured", "llama-3.1-8b-4bit", 52.0, "ok", "writing_tps"),  # no size
    # another model than the size recorded: judged against its own when stored, kept (B5)
    (8, 2, "ollama", "measured", "qwen2.5:7b", 50.0, "ok", "writing_tps"),
    (9, 1, "ollama", "entered", None, 20.0, "flagged", "writing_tps"),  # not 'ok': untouched
    (10, 1, "ollama", "entered", None, 0.5, "ok", "ttft_s"),  # no speed limit to a TTFT
]


def _seed_at_0014(engine: Engine) -> None:
    upgrade(engine, "0014")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO cohorts (id, name, guild_id, channel_id, post_time, timezone, "
                "start_date, advance, manual_day, join_mode, created_at) VALUES (1, 'Spring', "
                "'g', 'c', '09:00:00', 'UTC', '2026-03-02', 'daily', 1, 'open', "
                "'2026-03-01 10:00:00')"
            )
        )
        for mid, name, chip, bw in MEMBERS:
            conn.execute(
                text(_MEMBER), {"id": mid, "did": str(1000 + mid), "name": name, "chip": chip,
                                "bw": bw},
            )  # fmt: skip
        for i, (mid, server, model, size) in enumerate(SERVERS, 1):
            conn.execute(
                text(
                    "INSERT INTO member_servers (id, member_id, server, model, model_bytes) "
                    "VALUES (:i, :mid, :server, :model, :size)"
                ),
                {"i": i, "mid": mid, "server": server, "model": model, "size": size},
            )
        for nid, mid, server, source, model, value, verdict, metric in NUMBERS:
            conn.execute(
                text(
                    "INSERT INTO numbers (id, member_id, server, metric, value, unit, source, "
                    "model, recorded_at, verdict) VALUES (:nid, :mid, :server, :metric, :value, "
                    "'tokens/s', :source, :model, '2026-03-02 10:00:00', :verdict)"
                ),
                {"nid": nid, "mid": mid, "server": server, "metric": metric, "value": value,
                 "source": source, "model": model, "verdict": verdict},
            )  # fmt: skip


def test_old_ok_figures_without_a_limit_leave_the_boards(empty_engine: Engine) -> None:
    _seed_at_0014(empty_engine)
    upgrade(empty_engine)
    with Session(empty_engine) as session:
        got = {n.id: (n.verdict, n.verdict_note) for n in session.scalars(select(m.Number))}
        # The one rule: what speed_limit_for says is missing is the stored reason, word for word.
        for nid, mid, server, _source, _model, _value, verdict, metric in NUMBERS:
            member = session.get(m.Member, mid)
            assert member is not None
            limit = speed_limit_for(session, member, server)
            if verdict == "ok" and metric == "writing_tps" and isinstance(limit, str):
                assert got[nid] == ("unverified", limit), nid
            else:
                assert got[nid] == (verdict, None), nid
        assert {nid for nid, (v, _) in got.items() if v == "unverified"} == {1, 3, 5, 6, 7}

        typed = speed_boards(session, 1, "ollama", source="entered", include_private=True)
        ranked = {(r.name, r.value) for b in typed for r in b.rows}
        assert ranked == {("Chip", 44.6), ("Bandwidth", 40.0)}  # 9,000 tok/s no longer first
        assert not speed_boards(session, 1, "mlx", source="entered", include_private=True)
        measured = speed_boards(session, 1, "ollama", include_private=True)
        assert {(r.name, r.value) for b in measured for r in b.rows} == {("Chip", 50.0)}
        listed = {u.number_id: u.note for u in unranked(session, 1)}
        assert listed[1].startswith("felab does not know your machine yet")
        assert listed[3].startswith("felab does not know the size of the model file mlx runs")

        # What was missing set: judged again, and ranked (rejudge_waiting finds their notes).
        nomachine = session.get(m.Member, 1)
        assert nomachine is not None
        set_hardware(session, nomachine, chip="M4 Pro")
        changed = rejudge_waiting(session, nomachine)
        assert {(n.id, n.verdict) for n in changed} == {(1, "flagged"), (6, "ok")}
        chip = session.get(m.Member, 2)
        assert chip is not None
        set_server_model(session, chip, "mlx", "llama-3.1-8b-4bit", model_bytes="4.9GB")
        assert {(n.id, n.verdict) for n in rejudge_waiting(session, chip)} == {
            (3, "ok"),
            (7, "ok"),
        }
        session.rollback()

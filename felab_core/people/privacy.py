"""What felab holds about a member: everything exported on request, everything deleted on request.

The course promises "nothing leaves this browser"; felab keeps that spirit: a member can keep
their numbers off public leaderboards (`set_public_numbers`), take a copy of every row about
them, and have it all deleted. Deletion removes the member row and their card states, reviews,
spoken answers (and the ratings others gave them), the ratings they gave others, numbers,
pairing codes, workers, and jobs with their results and outbox rows, each by an explicit delete
(the foreign keys also cascade, but the explicit deletes make the outcome the same whatever the
database enforces). Jobs they asked for on someone else's machine stay that owner's, with who
asked cleared. Cohort-level rows (daily posts) hold nothing personal and stay. A job's PNG chart
is exported as {"base64": ...}.

Every text in the export passes through redact(): rows stored before felab refused secrets at
the door (a note or a job's server URL holding `https://user:pass@host` or an `sk-...` key)
would otherwise leave felab in a file the member may share. A machine's public key is not
free text and is kept as stored.

The bot's messages about the member in Discord (felab_core.people.chat_posts) are exported, and
deleting the member marks each for removal: the bot deletes them from Discord.
"""

from __future__ import annotations

import base64
from datetime import date, datetime, time
from typing import Any

from sqlalchemy import delete, inspect, select, update
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid
from felab_core.people.chat_posts import mark_for_deletion
from felab_core.people.members import get_member, keep_an_instructor
from felab_core.redact import redact

EXPORT_FORMAT = "felab.member-export/1"

#: Columns that are no free text and must come back as stored (a key, not a secret).
_KEPT_AS_STORED = frozenset({"public_key"})


def _plain(value: Any) -> Any:
    """`value` JSON-ready, every text in it (also inside a JSON column) with secrets masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes):  # a job's PNG chart: JSON has no bytes
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _row(obj: Any) -> dict[str, Any]:
    mapper = inspect(type(obj))
    return {
        c.key: getattr(obj, c.key) if c.key in _KEPT_AS_STORED else _plain(getattr(obj, c.key))
        for c in mapper.column_attrs
    }


def export_member(session: Session, member_id: int) -> dict[str, Any]:
    """Every row felab holds about the member, as JSON-ready data (`felab.member-export/1`)."""
    member = get_member(session, member_id)

    def rows(model: Any, column: Any) -> list[dict[str, Any]]:
        return [
            _row(r)
            for r in session.scalars(select(model).where(column == member_id).order_by(model.id))
        ]

    answers = rows(m.SpokenAnswer, m.SpokenAnswer.member_id)
    answer_ids = [a["id"] for a in answers]
    received = [
        {k: v for k, v in _row(r).items() if k != "rater_id"}
        for r in session.scalars(select(m.PeerRating).where(m.PeerRating.answer_id.in_(answer_ids)))
    ]
    jobs = rows(m.BenchJob, m.BenchJob.member_id)
    job_ids = [j["id"] for j in jobs]
    results = [
        _row(r)
        for r in session.scalars(select(m.BenchResult).where(m.BenchResult.job_id.in_(job_ids)))
    ]
    outbox = [
        _row(r)
        for r in session.scalars(
            select(m.JobOutbox).where(m.JobOutbox.job_id.in_(job_ids)).order_by(m.JobOutbox.id)
        )
    ]
    requested = [
        j for j in rows(m.BenchJob, m.BenchJob.requested_by_id) if j["member_id"] != member_id
    ]
    # A pairing code is kept only as a hash (and a lookup derived from it); both are a
    # credential's shadow, not about them. So are the machines' broker password hashes.
    codes = [
        {k: v for k, v in r.items() if k not in ("code_hash", "lookup")}
        for r in rows(m.PairCode, m.PairCode.member_id)
    ]
    card_keys = dict(session.execute(select(m.Card.id, m.Card.key)).all())
    states = rows(m.CardState, m.CardState.member_id)
    reviews = rows(m.Review, m.Review.member_id)
    for r in [*states, *reviews]:
        r["card_key"] = card_keys.get(r["card_id"])
    return {
        "format": EXPORT_FORMAT,
        "member": _row(member),
        "cohort": {"id": member.cohort.id, "name": _plain(member.cohort.name)},
        "servers": rows(m.MemberServer, m.MemberServer.member_id),
        "card_states": states,
        "reviews": reviews,
        "spoken_answers": answers,
        "ratings_received": received,
        "ratings_given": rows(m.PeerRating, m.PeerRating.rater_id),
        "numbers": rows(m.Number, m.Number.member_id),
        "workers": rows(m.Worker, m.Worker.member_id),
        "bench_jobs": jobs,
        "bench_results": results,
        "job_outbox": outbox,
        "bench_jobs_requested": requested,
        "pair_codes": codes,
        "chat_posts": rows(m.ChatPost, m.ChatPost.member_id),
    }


def delete_member(
    session: Session, member_id: int, *, by: m.Member | None = None, confirm: str = ""
) -> dict[str, int]:
    """Delete the member and everything about them; returns what was removed, per table.

    A member deletes themselves (`by` is None or is them) or an instructor of the same cohort
    does; `confirm` must repeat the member's Discord id so a slip cannot erase someone.
    """
    member = get_member(session, member_id)
    stranger = by is not None and by.id != member.id
    if (
        stranger
        and by is not None
        and (by.role != "instructor" or by.cohort_id != member.cohort_id)
    ):
        raise Forbidden("only the member themselves or their cohort's instructor can do this")
    keep_an_instructor(session, member, leaving=True)
    if confirm != member.discord_id:
        raise Invalid(
            f"to delete everything felab holds about this member, confirm with their id "
            f"({member.discord_id})"
        )
    counts: dict[str, int] = {}
    answer_ids = select(m.SpokenAnswer.id).where(m.SpokenAnswer.member_id == member_id)
    job_ids = select(m.BenchJob.id).where(m.BenchJob.member_id == member_id)
    # Explicit deletes, children first: the same result on any database, foreign keys on or off.
    steps: list[tuple[str, Any]] = [
        ("peer_ratings", delete(m.PeerRating).where(m.PeerRating.answer_id.in_(answer_ids))),
        ("peer_ratings_given", delete(m.PeerRating).where(m.PeerRating.rater_id == member_id)),
        ("spoken_answers", delete(m.SpokenAnswer).where(m.SpokenAnswer.member_id == member_id)),
        ("reviews", delete(m.Review).where(m.Review.member_id == member_id)),
        ("card_states", delete(m.CardState).where(m.CardState.member_id == member_id)),
        ("numbers", delete(m.Number).where(m.Number.member_id == member_id)),
        ("bench_results", delete(m.BenchResult).where(m.BenchResult.job_id.in_(job_ids))),
        ("job_outbox", delete(m.JobOutbox).where(m.JobOutbox.job_id.in_(job_ids))),
        (
            "bench_jobs_requested",
            update(m.BenchJob)
            .where(m.BenchJob.requested_by_id == member_id, m.BenchJob.member_id != member_id)
            .values(requested_by_id=None),
        ),
        ("bench_jobs", delete(m.BenchJob).where(m.BenchJob.member_id == member_id)),
        (
            "broker_users",
            delete(m.BrokerUser).where(
                m.BrokerUser.worker_id.in_(
                    select(m.Worker.id).where(m.Worker.member_id == member_id)
                )
            ),
        ),
        ("workers", delete(m.Worker).where(m.Worker.member_id == member_id)),
        ("pair_codes", delete(m.PairCode).where(m.PairCode.member_id == member_id)),
        ("member_servers", delete(m.MemberServer).where(m.MemberServer.member_id == member_id)),
    ]
    for name, stmt in steps:
        result = session.execute(stmt, execution_options={"synchronize_session": False})
        counts[name] = int(getattr(result, "rowcount", 0) or 0)
    # Not deleted here: the bot removes each message from Discord, then forgets it.
    counts["chat_posts"] = len(mark_for_deletion(session, member_id))
    session.expunge(member)
    session.execute(delete(m.Member).where(m.Member.id == member_id))
    counts["members"] = 1
    session.flush()
    return counts

"""The paired machines: which targets each reported, whether it is online, who may use it.

A worker reports only target *names* and server kinds (the URLs stay on its machine); what it
reports is cleaned here before it is kept.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.engine.server_kinds import ServerKind
from felab_core.errors import Forbidden, Invalid, NotFound
from felab_core.settings import Settings, get_settings

#: What may name a worker or a target: no spaces, no slashes, no URL.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
MAX_TARGETS = 64
_KINDS = frozenset(k.value for k in ServerKind)


def ago(when: datetime, now: datetime) -> str:
    """A moment as people say it: "12 s ago", "3 min ago", "2 h ago", "3 days ago"; one still
    to come "... ahead" (a clock far off)."""
    return ago_s((now - when).total_seconds())


def ago_s(seconds: float) -> str:
    """`seconds` in the past (negative: ahead) as people say it: "2 h ago", "365 days ahead"."""
    if not math.isfinite(seconds) or abs(seconds) > 1e12:
        return "ages ago" if seconds > 0 else "ages ahead"
    secs, side = int(abs(seconds)), "ago" if seconds >= 0 else "ahead"
    if secs < 90:
        return f"{secs} s {side}"
    if secs < 5400:
        return f"{secs // 60} min {side}"
    if secs < 2 * 86400:
        return f"{secs // 3600} h {side}"
    return f"{secs // 86400:,} days {side}"


def clean_targets(raw: Any) -> dict[str, str] | None:
    """A worker's reported targets as {name: kind}, or None when it reported none.

    Only names and kinds are kept (a worker never sends URLs, and anything else in the report
    is dropped): a name that could not name a target or an unknown kind is left out.
    """
    if not isinstance(raw, dict):
        return None
    out: dict[str, str] = {}
    for name, kind in raw.items():
        if len(out) >= MAX_TARGETS:
            break
        if isinstance(name, str) and NAME.match(name) and str(kind) in _KINDS:
            out[name] = str(kind)
    return dict(sorted(out.items()))


def worker_targets(worker: m.Worker) -> dict[str, str] | None:
    """The targets `worker` last reported ({name: kind}); None when it never reported any."""
    return clean_targets(worker.targets)


def check_target(worker: m.Worker, target: str, member: m.Member | None = None) -> None:
    """Refuse a target the worker does not report having; a worker that never reported its
    targets (an older felab) is given any name, and its own run says whether it has it."""
    known = worker_targets(worker)
    if known is None or target in known:
        return
    whose = "your machine" if member is not None and member.id == worker.member_id else "machine"
    has = ", ".join(known) if known else "none"
    raise Invalid(
        f"{whose} {worker.name} has no target {target}; it has: {has}. Add [targets.{target}] "
        "with its url to the targets file on that machine (FELAB_TARGETS_FILE): the worker "
        "reports it at its next heartbeat"
    )


def set_allow_instructors(
    session: Session, member: m.Member, worker: m.Worker, allow: bool
) -> None:
    """The owner's consent for their instructors to run jobs on this machine."""
    if worker.member_id != member.id:
        raise Forbidden("only the machine's owner can change who may use it")
    worker.allow_instructors = allow
    session.flush()


def may_use(member: m.Member, worker: m.Worker, owner: m.Member) -> bool:
    """The owner always; an instructor of the owner's cohort only if the owner allowed it."""
    if worker.member_id == member.id:
        return True
    return (
        member.role == "instructor"
        and member.cohort_id == owner.cohort_id
        and worker.allow_instructors
    )


@dataclass(frozen=True)
class WorkerView:
    worker: m.Worker
    online: bool
    last_seen: str  # for people: "12 s ago", "never"
    running_job: int | None


def is_online(worker: m.Worker, now: datetime, settings: Settings | None = None) -> bool:
    seen = worker.last_seen_at
    limit = timedelta(seconds=(settings or get_settings()).worker_offline_after_s)
    return seen is not None and now - seen <= limit


def list_workers(
    session: Session,
    member: m.Member,
    *,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> list[WorkerView]:
    """A member's machines, online or not, with when each was last heard from."""
    now = now or utcnow()
    workers = session.scalars(
        select(m.Worker).where(m.Worker.member_id == member.id).order_by(m.Worker.name)
    ).all()
    out = []
    for w in workers:
        running = session.scalar(
            select(m.BenchJob.id).where(
                m.BenchJob.worker_id == w.id, m.BenchJob.status == "running"
            )
        )
        seen = ago(w.last_seen_at, now) if w.last_seen_at else "never"
        out.append(WorkerView(w, is_online(w, now, settings), seen, running))
    return out


class NoMachine(Invalid):
    """The member has no paired machine to run a job on."""


class SeveralMachines(Invalid):
    """The member has several machines and named none: which one is theirs to say."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"several machines ({', '.join(names)}): name one")
        self.names = names


def the_machine(
    session: Session, member: m.Member, name: str | None, *, now: datetime | None = None
) -> m.Worker:
    """The machine a job goes to: the one named, else the member's only one.

    The rule is here once; each adapter words NoMachine and SeveralMachines for its own
    audience (a slash command's option, a CLI flag)."""
    if name:
        return find_worker(session, member, name)
    mine = list_workers(session, member, now=now)
    if not mine:
        raise NoMachine("no paired machine")
    if len(mine) > 1:
        raise SeveralMachines([v.worker.name for v in mine])
    return mine[0].worker


def find_worker(session: Session, member: m.Member, name: str) -> m.Worker:
    """One of the member's machines by name; an instructor may name any machine in their
    cohort, as `owner/name` when two members gave theirs the same name."""
    owner_hint = None
    if "/" in name:
        owner_hint, name = name.split("/", 1)
    q = (
        select(m.Worker, m.Member)
        .join(m.Member, m.Worker.member_id == m.Member.id)
        .where(m.Worker.name == name, m.Member.cohort_id == member.cohort_id)
        .order_by(m.Worker.id)
    )
    rows: list[tuple[m.Worker, m.Member]] = [(w, o) for w, o in session.execute(q).all()]
    own = [w for w, _ in rows if w.member_id == member.id]
    if own and owner_hint is None:
        return own[0]
    if rows and member.role == "instructor":
        if owner_hint is not None:
            rows = [(w, o) for w, o in rows if owner_hint in (o.display_name, o.discord_id)]
        if len(rows) == 1:
            return rows[0][0]
        if len(rows) > 1:
            choices = ", ".join(f"{o.display_name or o.discord_id}/{w.name}" for w, o in rows)
            raise Invalid(
                f"{len(rows)} machines are named {name!r}: name one as owner/name ({choices})"
            )
    raise NotFound(f"you have no worker named {name!r}: `felab worker list` shows your machines")

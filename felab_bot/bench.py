"""What `/bench` and `/worker` say, the service calls behind them, and the outbox's posts.

No Discord import here. Jobs are queued only through felab_core.jobs.queueing.queue_bench_job
(which checks the target name, ownership, limits and the hourly quota); the message goes to the
worker when the session commits (`send`). The outbox gives each finished job once, rendered by
felab_core.jobs.render (the same text `felab demo` prints), with the chart and the rows as CSV.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from felab_bot.drills import fit
from felab_bot.who import Who, member_of
from felab_core.db import models as m
from felab_core.errors import Invalid, NotFound
from felab_core.jobs.fleet import (
    NoMachine,
    SeveralMachines,
    check_target,
    list_workers,
    the_machine,
    worker_targets,
)
from felab_core.jobs.lifecycle import Send
from felab_core.jobs.outbox import claim_outbox, mark_posted, post_failed
from felab_core.jobs.pairing import issue_pair_code
from felab_core.jobs.queueing import cancel_job, deliveries, list_jobs, queue_bench_job
from felab_core.jobs.render import RenderedJob, render_job
from felab_core.jobs.spread import queue_spread_job, spread_workers

_SPLIT = re.compile(r"[\s,]+")


def _no_worker() -> str:
    return (
        "You have no paired worker yet: run `/worker pair` for a one-time code, then "
        "`felab worker pair --code CODE` and `felab worker start --name NAME` on your Mac."
    )


def worker_names(session: Session, who: Who, current: str, now: datetime) -> list[str]:
    """Autocomplete: the member's own machines whose name starts with what they typed."""
    member = member_of(session, who, now)
    names = [v.worker.name for v in list_workers(session, member, now=now)]
    low = current.lower()
    return [n for n in names if n.lower().startswith(low)][:25]


def target_names(
    session: Session, who: Who, worker: str | None, current: str, now: datetime
) -> list[str]:
    """Autocomplete for `targets`: the chosen worker's reported target names, completing the
    last word typed (the words before it kept, so several targets can be picked one by one)."""
    member = member_of(session, who, now)
    try:
        chosen = the_machine(session, member, worker, now=now)
    except (Invalid, NotFound):
        return []
    known = worker_targets(chosen) or {}
    words = [w for w in _SPLIT.split(current) if w]
    if current and not current[-1].isspace() and current[-1] != "," and words:
        last = words.pop()
    else:
        last = ""
    head = " ".join(words)
    out = []
    for name in known:
        if name in words or not name.lower().startswith(last.lower()):
            continue
        out.append(f"{head} {name}" if head else name)
    return [o for o in out if len(o) <= 100][:25]


def bench(
    session: Session,
    who: Who,
    targets: str,
    *,
    worker: str | None,
    preset: str,
    params: dict[str, int],
    send: Send | None,
    now: datetime,
    spread: int | None = None,
) -> str:
    """Queue one job per target on the member's worker (the only one, or the one named), or
    one target's run spread over `spread` of the member's machines."""
    member = member_of(session, who, now)
    names = [t for t in _SPLIT.split(targets.strip()) if t]
    if not names:
        raise Invalid("name at least one target from your worker's targets file, such as mlx")
    if spread is not None:
        return _spread(session, member, names, worker, preset, params, send, now, spread)
    if len(names) > 5:
        raise Invalid("at most 5 targets in one /bench")
    try:
        chosen = the_machine(session, member, worker, now=now)
    except NoMachine:
        return _no_worker()
    except SeveralMachines as several:
        listed = ", ".join(several.names)
        return f"You have several workers ({listed}): pick one with the `worker` option."
    for target in dict.fromkeys(names):  # all refused at once, before any is queued
        check_target(chosen, target, member)
    lines = []
    notices = set()
    for target in dict.fromkeys(names):
        queued = queue_bench_job(
            session, member, chosen, target, preset, params=params, send=send, now=now
        )
        lines.append(f"Job {queued.job.id}: {target} on {chosen.name}, preset {preset}: queued")
        if queued.notice:
            notices.add(queued.notice)
    lines.extend(sorted(notices))
    lines.append("The result is posted here when it is ready; `/bench status` shows progress.")
    return fit("\n".join(lines))


def _spread(
    session: Session,
    member: m.Member,
    names: list[str],
    worker: str | None,
    preset: str,
    params: dict[str, int],
    send: Send | None,
    now: datetime,
    count: int,
) -> str:
    if len(names) != 1 or worker is not None:
        raise Invalid(
            "a spread run times one target on several machines: name one target, no worker"
        )
    machines = spread_workers(session, member, names[0], count, now=now)
    queued = queue_spread_job(
        session, member, machines, names[0], preset, params=params, send=send, now=now
    )
    assert queued.job.start_at is not None
    lines = [
        f"Job {queued.job.id}: {names[0]} spread over {', '.join(w.name for w in machines)}, "
        f"preset {preset}: queued; the slices start together in "
        f"{(queued.job.start_at - now).total_seconds():.0f} s",
        *queued.notices,
        "The merged result is posted here when the last slice is in; `/bench status` shows "
        "each slice.",
    ]
    return fit("\n".join(lines))


def status(session: Session, who: Who, now: datetime) -> str:
    member = member_of(session, who, now)
    views = list_jobs(session, member, limit=10)
    if not views:
        return "No jobs yet: `/bench mlx` on a paired worker starts one."
    lines = ["```", "job  target    status    done"]
    for v in views:
        target = (v.job.target or v.job.server)[:9]
        lines.append(f"{v.job.id:<4} {target:<9} {v.job.status:<9} {v.progress}")
    lines.append("```")
    failed = [v for v in views if v.job.error and v.job.status != "cancelled"]
    for v in failed[:3]:
        lines.append(f"Job {v.job.id}: {fit(v.job.error or '', 300)}")
    return fit("\n".join(lines))


@dataclass(frozen=True)
class Cancelled:
    text: str
    deliveries: list[tuple[int, int | None]]  # (job, machine) messages to withdraw


def cancel(session: Session, who: Who, job_id: int, now: datetime) -> Cancelled:
    member = member_of(session, who, now)
    job = cancel_job(session, member, job_id, now=now)
    sent = deliveries(session, job)
    if job.started_at is not None:
        return Cancelled(f"Job {job_id} cancelled: its machine stops the run within seconds.", sent)
    return Cancelled(f"Job {job_id} cancelled.", sent)


def pair(session: Session, who: Who, name: str, allow_instructors: bool, now: datetime) -> str:
    member = member_of(session, who, now)
    code = issue_pair_code(session, member, name, allow_instructors=allow_instructors, now=now)
    return (
        f"Your one-time code for **{name}**: `{code}` (works once, for a few minutes; keep it "
        f"to yourself).\nOn that Mac: `felab worker pair --code {code}`, then "
        f"`felab worker start --name {name}`."
    )


def workers(session: Session, who: Who, now: datetime) -> str:
    member = member_of(session, who, now)
    views = list_workers(session, member, now=now)
    if not views:
        return _no_worker()
    lines = []
    for v in views:
        state = "online" if v.online else "offline"
        job = f", running job {v.running_job}" if v.running_job else ""
        known = worker_targets(v.worker)
        has = (
            "targets not reported yet"
            if known is None
            else "targets: " + (", ".join(known) or "none")
        )
        lines.append(f"**{v.worker.name}**: {state}, last seen {v.last_seen}{job}; {has}")
    return fit("\n".join(lines))


# ----------------------------------------------------------------------------- the outbox


@dataclass(frozen=True)
class ResultPost:
    """One finished job to post: where, and what (felab_core.jobs.render, as the demo shows it)."""

    outbox_id: int
    member_id: int  # whose machine: deleting their data deletes this post too
    channel_id: int | None  # the cohort's channel; None: only the member can see it
    user_id: int  # the member who owns the worker (Discord id), for a private post or a ping
    private: bool
    job: RenderedJob


def claim_results(session: Session, now: datetime) -> list[ResultPost]:
    """Claim finished jobs and render each (a second bot skips claimed ones)."""
    out = []
    for entry in claim_outbox(session, now=now):
        job = session.get(m.BenchJob, entry.job_id)
        owner = session.get(m.Member, job.member_id) if job is not None else None
        if job is None or owner is None:
            mark_posted(session, entry.id, message_ref="gone", now=now)
            continue
        cohort = owner.cohort
        channel = (
            int(cohort.channel_id)
            if cohort is not None and cohort.channel_id and cohort.channel_id.isdigit()
            else None
        )
        user_id = int(owner.discord_id) if owner.discord_id.isdigit() else 0
        out.append(
            ResultPost(
                entry.id,
                owner.id,
                channel,
                user_id,
                not owner.public_numbers,
                render_job(session, job),
            )
        )
    return out


def posted(session: Session, outbox_id: int, message_ref: str, now: datetime) -> None:
    mark_posted(session, outbox_id, message_ref=message_ref, now=now)


def post_refused(session: Session, outbox_id: int, error: str, now: datetime) -> bool:
    """Discord refused the post: tried again later, or set aside (True) after the last try."""
    return post_failed(session, outbox_id, error, now=now)

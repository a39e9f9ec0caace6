"""Cohorts and members: creating a cohort, joining it, roles, clocks and machines.

Every function takes the caller's session and leaves committing to it (the bot, the CLI and the
workers each wrap a call in `session_scope`).
"""

from __future__ import annotations

import re
import secrets
from datetime import date, datetime, time
from fractions import Fraction

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.content.calendar import ADVANCE_MODES, local_date, zone
from felab_core.db import models as m
from felab_core.engine.server_kinds import validate_server
from felab_core.errors import Forbidden, Invalid, NotFound
from felab_core.redact import secret_problem
from felab_core.sizing.errors import SizingError
from felab_core.sizing.known_models import file_size_problem
from felab_core.sizing.speed_limit import find_chip
from felab_core.sizing.units import (
    GB,
    MIN_WEIGHTS_BYTES,
    bytes_text,
    parse_bandwidth,
    parse_model_bytes,
)
from felab_core.text import formula_mark, holds_hidden

ROLES = ("student", "instructor")
JOIN_MODES = ("open", "code", "invite")
LOCAL_COHORT = "local"
LOCAL_MEMBER = "local"


def create_cohort(
    session: Session,
    name: str,
    *,
    timezone: str,
    start_date: date,
    post_time: time = time(9, 0),
    guild_id: str | None = None,
    channel_id: str | None = None,
    advance: str = "daily",
    join_mode: str = "open",
    now: datetime | None = None,
) -> m.Cohort:
    """A new cohort; `join_mode` 'code' makes up a join code the instructors hand out."""
    zone(timezone)
    if advance not in ADVANCE_MODES:
        raise Invalid(f"advance must be one of {', '.join(ADVANCE_MODES)}, got {advance!r}")
    if join_mode not in JOIN_MODES:
        raise Invalid(f"join mode must be one of {', '.join(JOIN_MODES)}, got {join_mode!r}")
    if not name.strip():
        raise Invalid("a cohort needs a name, such as 'Spring 2026'")
    if guild_id is not None and channel_id is not None:
        taken = session.scalar(
            select(m.Cohort).where(m.Cohort.guild_id == guild_id, m.Cohort.channel_id == channel_id)
        )
        if taken is not None:
            raise Invalid(f"this channel already hosts cohort {taken.name!r}; pick another channel")
    cohort = m.Cohort(
        name=name.strip(),
        guild_id=guild_id,
        channel_id=channel_id,
        post_time=post_time,
        timezone=timezone,
        start_date=start_date,
        advance=advance,
        manual_day=1,
        join_mode=join_mode,
        join_code=secrets.token_urlsafe(6) if join_mode == "code" else None,
    )
    if now is not None:
        cohort.created_at = now
    session.add(cohort)
    session.flush()
    return cohort


def get_cohort(session: Session, cohort_id: int) -> m.Cohort:
    cohort = session.get(m.Cohort, cohort_id)
    if cohort is None:
        raise NotFound(
            f"no cohort {cohort_id}: `felab status` lists the cohorts (the bot's /setup cohort "
            "makes one in a channel); leave --cohort out for this terminal's own"
        )
    return cohort


def cohort_for_channel(session: Session, guild_id: str, channel_id: str) -> m.Cohort:
    cohort = session.scalar(
        select(m.Cohort).where(m.Cohort.guild_id == guild_id, m.Cohort.channel_id == channel_id)
    )
    if cohort is None:
        raise NotFound("no cohort runs in this channel; an instructor sets one up first")
    return cohort


def find_member(session: Session, cohort_id: int, discord_id: str) -> m.Member | None:
    return session.scalar(
        select(m.Member).where(m.Member.cohort_id == cohort_id, m.Member.discord_id == discord_id)
    )


def get_member(session: Session, member_id: int) -> m.Member:
    member = session.get(m.Member, member_id)
    if member is None:
        raise NotFound(f"no member {member_id}; they may have left and had their data deleted")
    return member


def require_instructor(member: m.Member) -> None:
    if member.role != "instructor":
        raise Forbidden("only the cohort's instructors can do this")


def _new_member(
    session: Session,
    cohort: m.Cohort,
    discord_id: str,
    display_name: str,
    role: str,
    timezone: str | None,
    now: datetime | None,
) -> m.Member:
    if role not in ROLES:
        raise Invalid(f"role must be student or instructor, got {role!r}")
    if not re.fullmatch(r"[0-9A-Za-z_.-]{1,32}", discord_id):
        raise Invalid(f"{discord_id!r} is not a Discord user id (digits, as Discord shows them)")
    tz = timezone or cohort.timezone
    zone(tz)
    member = m.Member(
        cohort_id=cohort.id,
        discord_id=discord_id,
        display_name=display_name.strip()[:100],
        role=role,
        timezone=tz,
    )
    if now is not None:
        member.joined_at = now
    session.add(member)
    session.flush()
    return member


def join_cohort(
    session: Session,
    cohort: m.Cohort,
    discord_id: str,
    *,
    display_name: str = "",
    timezone: str | None = None,
    code: str | None = None,
    now: datetime | None = None,
) -> m.Member:
    """A student joins by the cohort's rule; joining twice returns the existing member."""
    existing = find_member(session, cohort.id, discord_id)
    if existing is not None:
        return existing
    if cohort.join_mode == "invite":
        raise Forbidden(f"{cohort.name} is invitation only: ask an instructor to add you")
    if cohort.join_mode == "code" and (code is None or code.strip() != cohort.join_code):
        raise Forbidden(f"{cohort.name} needs its join code: ask an instructor for it")
    return _new_member(session, cohort, discord_id, display_name, "student", timezone, now)


def add_member(
    session: Session,
    cohort: m.Cohort,
    discord_id: str,
    *,
    role: str = "student",
    display_name: str = "",
    timezone: str | None = None,
    by: m.Member | None = None,
    now: datetime | None = None,
) -> m.Member:
    """An instructor adds someone (any join mode); `by=None` is setup (the first instructor)."""
    if by is not None:
        require_instructor(by)
    existing = find_member(session, cohort.id, discord_id)
    if existing is not None:
        if existing.role != role:
            if role not in ROLES:
                raise Invalid(f"role must be student or instructor, got {role!r}")
            keep_an_instructor(session, existing)
            existing.role = role
            session.flush()
        return existing
    return _new_member(session, cohort, discord_id, display_name, role, timezone, now)


def keep_an_instructor(session: Session, member: m.Member, *, leaving: bool = False) -> None:
    """Refuse to demote (or, `leaving`, remove) a cohort's last instructor: a cohort keeps one.
    A last instructor who is the cohort's only member may leave (nobody is left to instruct)."""
    if member.role != "instructor":
        return
    others = select(m.Member.id).where(
        m.Member.cohort_id == member.cohort_id, m.Member.id != member.id
    )
    if session.scalar(others.where(m.Member.role == "instructor").limit(1)) is not None:
        return
    if leaving and session.scalar(others.limit(1)) is None:
        return
    raise Invalid(
        "a cohort keeps at least one instructor and this is its last: make someone else an "
        "instructor first (`/setup member role:instructor`)"
    )


def set_role(session: Session, member: m.Member, role: str, *, by: m.Member) -> m.Member:
    require_instructor(by)
    if role not in ROLES:
        raise Invalid(f"role must be student or instructor, got {role!r}")
    if role != member.role:
        keep_an_instructor(session, member)
    member.role = role
    session.flush()
    return member


def instructors(session: Session, cohort_id: int) -> list[m.Member]:
    return list(
        session.scalars(
            select(m.Member).where(m.Member.cohort_id == cohort_id, m.Member.role == "instructor")
        )
    )


def set_timezone(session: Session, member: m.Member, timezone: str) -> m.Member:
    """Change a member's clock; days already counted toward a streak keep their dates."""
    zone(timezone)
    member.timezone = timezone
    session.flush()
    return member


def set_hardware(
    session: Session,
    member: m.Member,
    *,
    chip: str | None = None,
    bandwidth_gb_s: float | str | None = None,
) -> m.Member:
    """Record the member's machine by chip name (from the bandwidth table) or by bandwidth."""
    if (chip is None) == (bandwidth_gb_s is None):
        raise Invalid(
            "give the machine one way: a chip name (such as 'M4 Pro') or a bandwidth in GB/s"
        )
    try:
        if chip is not None:
            member.chip = find_chip(chip).name
            member.bandwidth_gb_s = None
        else:
            text = str(bandwidth_gb_s).strip()
            if text.startswith("-"):
                raise SizingError(f"a memory bandwidth must be more than zero, got {text!r}")
            member.bandwidth_gb_s = float(parse_bandwidth(text) / GB)
            member.chip = None
    except SizingError as exc:
        raise Invalid(str(exc)) from None
    session.flush()
    return member


def bandwidth_bytes_per_s(member: m.Member) -> Fraction | None:
    """The member's memory bandwidth in bytes per second, if their machine is known."""
    if member.chip:
        return find_chip(member.chip).bytes_per_second
    if member.bandwidth_gb_s:
        return Fraction(str(member.bandwidth_gb_s)) * GB
    return None


#: No model file is bigger: a trillion weights at 32 bits is 4 TB.
MAX_MODEL_BYTES = 10 * 10**12


def set_server_model(
    session: Session,
    member: m.Member,
    server: str,
    model: str,
    *,
    model_bytes: int | str | None = None,
    model_label: str | None = None,
) -> m.MemberServer:
    """Record the model file a member's server runs (its size sets the speed limit)."""
    server = validate_server(server)
    if not model.strip():
        raise Invalid("give the model name as the server shows it, such as llama3.1:8b")
    for what, text, most, retype in (
        ("model name", model, 300, "type it as the server shows it"),
        ("label", model_label or "", 100, "type it in plain characters, such as llama-3.1-8b-q4"),
    ):
        if holds_hidden(text):  # an escape code, or U+202E turning what follows around
            raise Invalid(f"the {what} holds invisible or control characters: {retype}")
        if len(text.strip()) > most:
            raise Invalid(f"the {what} is longer than {most} characters: give the short name")
        if mark := formula_mark(text, allowed="@"):  # a spreadsheet would run it as a formula
            raise Invalid(f"the {what} begins with {mark!r}: no model's name does")
        if secret := secret_problem(what, text.strip()):  # stored, and shown on every call
            raise Invalid(f"{secret}: felab stores none and shows none: {retype}")
    size: int | None = None
    if model_bytes is not None:
        try:
            exact = parse_model_bytes(str(model_bytes), "--bytes", table=False)
        except SizingError as exc:
            raise Invalid(str(exc)) from None
        if exact <= 0:  # 1e-20 is above zero, and far below a byte: said below, as a size
            raise Invalid("the model file's size must be more than zero, such as 4.9GB")
        size = int(exact)
        if size > MAX_MODEL_BYTES:
            raise Invalid(
                f"{model_bytes} is more than any model file (the largest are a few TB): write "
                "the size `ollama list` or `ls -l` shows, such as 4.9GB"
            )
        if size < MIN_WEIGHTS_BYTES:  # the tiny test model (0.7 MB) is a model file
            raise Invalid(
                f"{model_bytes} is only "
                f"{bytes_text(size) if size else 'part of a byte'}, no model file: "
                "write the unit, such as "
                "4.9GB (`ollama list` shows it)"
            )
        for given in (model, model_label or ""):
            problem = file_size_problem(given.strip(), size) if given.strip() else None
            if problem:
                raise Invalid(problem)
    row = session.scalar(
        select(m.MemberServer).where(
            m.MemberServer.member_id == member.id, m.MemberServer.server == server
        )
    )
    if row is None:
        row = m.MemberServer(member_id=member.id, server=server, model=model.strip())
        session.add(row)
    row.model = model.strip()
    row.model_bytes = size
    row.model_label = model_label.strip() if model_label else None
    session.flush()
    return row


def update_server_model(
    session: Session,
    member: m.Member,
    server: str,
    *,
    model: str | None = None,
    model_bytes: int | str | None = None,
    model_label: str | None = None,
) -> m.MemberServer:
    """Change what is given about a server's model file and keep the rest (an empty label
    clears it). A server felab knows nothing about yet needs its model's name: the one given,
    else the one its latest measured run reported."""
    server = validate_server(server)
    row = session.scalar(
        select(m.MemberServer).where(
            m.MemberServer.member_id == member.id, m.MemberServer.server == server
        )
    )
    name = model if model is not None else (row.model if row is not None else None)
    if name is None:
        name = session.scalar(
            select(m.Number.model)
            .where(
                m.Number.member_id == member.id,
                m.Number.server == server,
                m.Number.source == "measured",
                m.Number.model.is_not(None),
            )
            .order_by(m.Number.recorded_at.desc(), m.Number.id.desc())
            .limit(1)
        )
    if name is None:
        raise Invalid(
            f"felab does not know which model {server} runs yet: give its name as the server "
            "shows it, such as llama3.1:8b"
        )
    if model_bytes is None and row is not None:
        model_bytes = row.model_bytes
    if model_label is None and row is not None:
        model_label = row.model_label
    return set_server_model(
        session, member, server, name, model_bytes=model_bytes, model_label=model_label
    )


def set_public_numbers(session: Session, member: m.Member, public: bool) -> m.Member:
    """Show or hide the member's numbers on public leaderboards (instructors always see them)."""
    member.public_numbers = public
    session.flush()
    return member


def ensure_local_member(session: Session, *, timezone: str = "UTC", now: datetime) -> m.Member:
    """The terminal's own cohort and member, made on first use: `felab drill` without Discord."""
    cohort = session.scalar(
        select(m.Cohort).where(m.Cohort.name == LOCAL_COHORT, m.Cohort.guild_id.is_(None))
    )
    if cohort is None:
        cohort = create_cohort(
            session,
            LOCAL_COHORT,
            timezone=timezone,
            start_date=local_date(now, timezone),
            advance="manual",
            join_mode="invite",
            now=now,
        )
    member = find_member(session, cohort.id, LOCAL_MEMBER)
    if member is None:
        member = _new_member(session, cohort, LOCAL_MEMBER, "me", "instructor", timezone, now)
    return member

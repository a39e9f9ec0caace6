"""Whom a command acts for: the member named by --member/--cohort (an instructor's terminal,
or a test), else this terminal's own learner, made on first use in this machine's time zone."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.content.calendar import zone
from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.people.members import (
    LOCAL_COHORT,
    LOCAL_MEMBER,
    ensure_local_member,
    find_member,
    get_cohort,
)
from felab_core.text import with_hidden_shown


def local_zone() -> str:
    """This machine's IANA time zone name (TZ, else /etc/localtime), or UTC."""
    return _local_zone()[0]


def _local_zone() -> tuple[str, bool, str]:
    """The zone's name, whether it came from TZ, and TZ when it was passed over as a POSIX rule
    (else ''). Any name zoneinfo reads is taken from TZ (TZ=UTC had been passed over for
    /etc/localtime), and glibc's path form (TZ=/usr/share/zoneinfo/Europe/Paris) is read as
    the name at its end."""
    name = os.environ.get("TZ", "").strip().lstrip(":")
    passed_over = ""
    if "zoneinfo/" in name:
        name = name.split("zoneinfo/", 1)[1]
    if name:
        try:
            zone(name)
            return name, True, ""
        except Invalid:
            # Meant as a zone's name (a POSIX rule such as JST-9 holds a digit, and is passed
            # over): said, naming TZ, when a learner is made in it.
            if "/" in name or not any(c.isdigit() for c in name):
                return name, True, ""
            passed_over = name
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1], False, passed_over
    except OSError:
        pass
    return "UTC", False, passed_over


def _refuse_a_posix_rule(session: Session, rule: str, name: str) -> None:
    """TZ=JST-9 (or UTC+5, which POSIX reads as five hours behind UTC) is not a zone felab
    reads: this terminal's learner had been made silently in /etc/localtime's zone instead,
    and --timezone picks only a new learner's zone, so a learner not made yet is refused with
    the zone it would get. One already made keeps its zone."""
    cohort = session.scalar(
        select(m.Cohort).where(m.Cohort.name == LOCAL_COHORT, m.Cohort.guild_id.is_(None))
    )
    if cohort is not None and find_member(session, cohort.id, LOCAL_MEMBER) is not None:
        return
    raise Invalid(
        f"the TZ environment variable is {with_hidden_shown(repr(rule[:40]))}, a POSIX rule, "
        f"not an IANA time zone name: this terminal's learner would be made in {name} (what "
        "felab reads without TZ), and a learner keeps the zone it is made in. Give felab "
        "drill --timezone Area/City (such as Asia/Tokyo), or --timezone "
        f"{name} to take that one, or set TZ to an Area/City"
    )


def member_for(
    session: Session, member_id: str | None, cohort_id: int | None, *, timezone: str = ""
) -> m.Member:
    """The member --member/--cohort name, or this terminal's own learner (made if new, in
    `timezone` or this machine's zone). Invalid says which option is wrong, each before the
    database is asked: an empty --member first, since no cohort makes it right."""
    if member_id is None:
        if cohort_id is not None:
            raise Invalid("--cohort picks a member's cohort: give --member too")
        name, from_tz, rule = (timezone, False, "") if timezone else _local_zone()
        if rule:
            _refuse_a_posix_rule(session, rule, name)
        try:
            return ensure_local_member(session, timezone=name, now=datetime.now(UTC))
        except Invalid:
            if not from_tz:
                raise
            # a learner is made in TZ's zone on first use: "'Foo/Bar' is not a time zone
            # name" had not said where Foo/Bar came from
            raise Invalid(
                f"the TZ environment variable is {with_hidden_shown(repr(os.environ['TZ']))}, "
                "not an IANA time zone name, and this terminal's learner is made in it: set TZ "
                "to one such as Europe/Paris (or unset it, and /etc/localtime is read), or give "
                "felab drill --timezone Europe/Paris"
            ) from None
    if not member_id.strip():
        raise Invalid("--member is empty: give the member's Discord id (a number)")
    if cohort_id is None:
        raise Invalid("--member needs --cohort (the cohort's number)")
    cohort = get_cohort(session, cohort_id)
    member = find_member(session, cohort.id, member_id)
    if member is None:
        raise Invalid(f"no member {with_hidden_shown(member_id)} in cohort {cohort.name}")
    return member

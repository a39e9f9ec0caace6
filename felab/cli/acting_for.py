"""Whom a command acts for: the member named by --member/--cohort (an instructor's terminal,
or a test), else this terminal's own learner, made on first use in this machine's time zone."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.orm import Session

from felab_core.content.calendar import zone
from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.people.members import ensure_local_member, find_member, get_cohort
from felab_core.text import with_hidden_shown


def local_zone() -> str:
    """This machine's IANA time zone name (TZ, else /etc/localtime), or UTC."""
    return _local_zone()[0]


def _local_zone() -> tuple[str, bool]:
    """The zone's name, and whether it came from TZ. Any name zoneinfo reads is taken from TZ
    (TZ=UTC had been passed over for /etc/localtime), and glibc's path form
    (TZ=/usr/share/zoneinfo/Europe/Paris) is read as the name at its end."""
    name = os.environ.get("TZ", "").strip().lstrip(":")
    if "zoneinfo/" in name:
        name = name.split("zoneinfo/", 1)[1]
    if name:
        try:
            zone(name)
            return name, True
        except Invalid:
            # Meant as a zone's name (a POSIX rule such as JST-9 holds a digit, and is passed
            # over as before): said, naming TZ, when a learner is made in it.
            if "/" in name or not any(c.isdigit() for c in name):
                return name, True
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1], False
    except OSError:
        pass
    return "UTC", False


def member_for(
    session: Session, member_id: str | None, cohort_id: int | None, *, timezone: str = ""
) -> m.Member:
    """The member --member/--cohort name, or this terminal's own learner (made if new, in
    `timezone` or this machine's zone). Invalid says which option is wrong, each before the
    database is asked: an empty --member first, since no cohort makes it right."""
    if member_id is None:
        if cohort_id is not None:
            raise Invalid("--cohort picks a member's cohort: give --member too")
        name, from_tz = (timezone, False) if timezone else _local_zone()
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

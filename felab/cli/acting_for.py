"""Whom a command acts for: the member named by --member/--cohort (an instructor's terminal,
or a test), else this terminal's own learner, made on first use in this machine's time zone."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.people.members import ensure_local_member, find_member, get_cohort
from felab_core.text import with_hidden_shown


def local_zone() -> str:
    """This machine's IANA time zone name (TZ, else /etc/localtime), or UTC."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name and "/" in name:
        return name
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return "UTC"


def member_for(
    session: Session, member_id: str | None, cohort_id: int | None, *, timezone: str = ""
) -> m.Member:
    """The member --member/--cohort name, or this terminal's own learner (made if new, in
    `timezone` or this machine's zone). Invalid says which option is wrong, each before the
    database is asked: an empty --member first, since no cohort makes it right."""
    if member_id is None:
        if cohort_id is not None:
            raise Invalid("--cohort picks a member's cohort: give --member too")
        return ensure_local_member(
            session, timezone=timezone or local_zone(), now=datetime.now(UTC)
        )
    if not member_id.strip():
        raise Invalid("--member is empty: give the member's Discord id (a number)")
    if cohort_id is None:
        raise Invalid("--member needs --cohort (the cohort's number)")
    cohort = get_cohort(session, cohort_id)
    member = find_member(session, cohort.id, member_id)
    if member is None:
        raise Invalid(f"no member {with_hidden_shown(member_id)} in cohort {cohort.name}")
    return member

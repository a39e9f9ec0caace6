"""`felab status`: the fleet on one screen, for an instructor or whoever runs the server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from felab.cli.db import service_errors, sessions
from felab.cli.errors import err
from felab.cli.output import plain
from felab_core.db.session import session_scope
from felab_core.db.types import utcnow
from felab_core.failures import EXIT_UNREACHABLE, EXIT_USAGE
from felab_core.redact import redact
from felab_core.settings import get_settings
from felab_core.text import with_hidden_shown

if TYPE_CHECKING:
    from felab_core.ops.status import FleetStatus


#: Seconds for all of the queue reads after the reachability check (LLEN per machine).
_READS_WITHIN_S = 5.0


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:,.0f} days ago"


def status(
    as_json: bool = typer.Option(False, "--json", help="Print it as JSON."),
) -> None:
    """Machines (online, busy, stale, offline) with their queues, jobs of the last day by
    status, the outbox (posts waiting, dead letters) and each cohort's next daily post."""
    from dataclasses import replace

    from felab_core.ops.status import fleet_status
    from felab_worker.dispatch import Dispatcher

    settings = get_settings()
    with service_errors(), session_scope(sessions()) as session:
        fleet = fleet_status(session, utcnow(), settings)
    broker = "reached"
    failed: int | None = None  # the exit code when the broker could not be used
    reached = False
    try:
        # one budget for every queue read: a broker that answers a byte every 2 s ran to 53 s
        dispatcher = Dispatcher(settings, within_s=_READS_WITHIN_S)
        if dispatcher.redis:  # asked even with no machine: "reached" is a fact, not a default
            from felab_worker.pairing import check_reachable

            check_reachable(
                dispatcher.url,
                settings,
                timeout_s=3.0,
                advice="is Redis running, and does FELAB_BROKER_URL name it?",
            )
        else:
            broker = "embedded (this machine's SQLite broker)"
        reached = True
        machines = [replace(mc, depth=dispatcher.depth(mc.worker_id)) for mc in fleet.machines]
        waiting = dispatcher.inbox_waiting()
        oldest = dispatcher.oldest_signed_s() if waiting else None
        fleet = replace(fleet, machines=machines, inbox_waiting=waiting, inbox_oldest_s=oldest)
    except Exception as exc:
        if reached:  # it answered, then failed a queue read: whose to fix, the words say
            from felab_worker.answers import BrokerUnusable, failure

            fault = failure(exc, dispatcher.url, "LLEN", settings.broker_prefix)
            broker = f"reached, but {fault}"
            failed = EXIT_UNREACHABLE if isinstance(fault, BrokerUnusable) else EXIT_USAGE
        else:
            from felab_worker.pairing import BrokerNotRedis, BrokerRefusedUser
            from felab_worker.tls import CAFileError

            said = with_hidden_shown(redact(str(exc)))
            said = said if len(said) <= 400 else said[:400] + "..."
            failed = EXIT_UNREACHABLE
            if isinstance(exc, BrokerNotRedis):  # reached: its words say what answered
                broker = said
            elif isinstance(exc, CAFileError):  # nothing was tried: a setting to fix (B6)
                broker, failed = f"bad setting: {said}", EXIT_USAGE
            elif isinstance(exc, BrokerRefusedUser):  # reached: the password is wrong (B7)
                broker, failed = said, EXIT_USAGE
            else:
                broker = f"not reached: {said}" if said else f"not reached ({type(exc).__name__})"
    if as_json:
        typer.echo(json.dumps({**fleet.to_json(), "broker": broker}))
    else:
        _print(fleet, broker)
    if failed is not None:  # a monitoring script reads the exit code: 3 not reached, 2 refused
        # the table's broker line already says why: once is enough on a terminal
        err(f"broker {broker}" if as_json else "the broker could not be used (why: the line above)")
        raise typer.Exit(failed)


def _print(fleet: FleetStatus, broker: str) -> None:
    console = Console(highlight=False)
    table = Table("worker", "id", "state", "last seen", "running", "queued", "in its queue",
                  title="machines")  # fmt: skip
    for mc in fleet.machines:
        table.add_row(*map(plain, (
            mc.name, str(mc.worker_id), mc.state, _age(mc.last_seen_s),
            str(mc.running_job or "-"), str(mc.queued_jobs),
            "-" if mc.depth is None else str(mc.depth),
        )))  # fmt: skip
    console.print(table if fleet.machines else "no paired machines yet")
    jobs = ", ".join(f"{k} {v}" for k, v in sorted(fleet.jobs_last_day.items())) or "none"
    console.print(f"jobs in the last day: {jobs}", markup=False)
    console.print(
        f"outbox: {fleet.outbox_pending} waiting, {fleet.outbox_dead} dead letters"
        + (" (`felab worker outbox`)" if fleet.outbox_dead else ""),
        markup=False,
    )
    for cohort_id, cohort, when in fleet.next_posts:
        console.print(f"next daily post of {cohort} (cohort {cohort_id}): {when}", markup=False)
    if fleet.inbox_waiting is not None:
        console.print(f"ingest inbox: {_inbox(fleet)}", markup=False)
    console.print(f"broker: {broker}", markup=False)


def _inbox(fleet: FleetStatus) -> str:
    """The ingest's backlog: results wait behind everything in it (is the ingest running?)."""
    if not fleet.inbox_waiting:
        return "empty"
    said = f"{fleet.inbox_waiting:,} waiting"
    if fleet.inbox_oldest_s:
        said += f", the oldest signed {_age(fleet.inbox_oldest_s)}"
    return said + " (is `felab worker ingest` running and keeping up?)"

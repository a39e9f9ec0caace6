"""The server's side of `felab worker`: the ingest, pairing codes, machines and jobs, the outbox.

These open the database (and the trusted broker user), so they run on the instructor's server;
felab/cli/worker.py loads this module only when one of them is asked for.
"""

from __future__ import annotations

import logging
import socket

import typer
from rich.console import Console
from rich.table import Table

from felab.cli.db import service_errors, sessions
from felab.cli.errors import EXIT_UNREACHABLE, EXIT_USAGE, err
from felab.cli.output import LogLevel, plain
from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.errors import Invalid
from felab_core.jobs.messages import JobMessage
from felab_core.redact import redact
from felab_core.settings import Settings, get_settings

console = Console(highlight=False, soft_wrap=True)  # URLs and paths are copied: never cut
log = logging.getLogger("felab.ingest")

MEMBER = typer.Option(None, "--member", help="The member's Discord id.")
COHORT = typer.Option(None, "--cohort", help="The member's cohort id.")


def _member(discord_id: str | None, cohort_id: int | None) -> m.Member:
    from felab.cli.acting_for import member_for

    with service_errors(), session_scope(sessions()) as session:
        return member_for(session, discord_id, cohort_id)


def issue_code(
    name: str, member: str | None, cohort: int | None, allow: bool, settings: Settings
) -> str:
    """A one-time pairing code for `name` (what the bot's /worker pair gives)."""
    from felab_core.jobs.pairing import issue_pair_code

    who = _member(member, cohort)
    with service_errors(), session_scope(sessions()) as session:
        return issue_pair_code(session, who, name, allow_instructors=allow, settings=settings)


def ingest(
    loglevel: LogLevel = typer.Option(
        LogLevel.WARNING,
        case_sensitive=False,
        help="Level of Celery's own logs (felab's: FELAB_LOG_LEVEL).",
    ),
) -> None:
    """Run the trusted ingest: the one process that writes job progress and results to the
    database, redeems pairing requests, keeps the broker's users in step with the database, with
    the reconciler beating inside it."""
    from felab.cli.boundary import debugging
    from felab_core.ops import logs
    from felab_worker.answers import BrokerUnusable, broker_fault, shown
    from felab_worker.app import worker_args
    from felab_worker.broker import broker_url, is_redis
    from felab_worker.fatal import kept_fatal
    from felab_worker.ingest import create_app
    from felab_worker.names import BEAT_QUEUE, INGEST_QUEUE, PAIRING_QUEUE
    from felab_worker.pairing import BrokerUnreachable, check_reachable

    settings = get_settings()
    logs.setup(settings, level=loglevel.value)
    sessions()  # the schema is checked now, not at the first event
    dispatch_url = broker_url(settings)
    if is_redis(dispatch_url):  # before anything is made: a broker that is down leaves nothing
        try:
            check_reachable(
                dispatch_url,
                settings,
                timeout_s=5.0,
                advice="is Redis running, and does FELAB_BROKER_URL name it (felab's admin user)?",
            )
        except BrokerUnreachable as exc:
            err(str(exc))
            raise typer.Exit(EXIT_UNREACHABLE) from None
    app, state = create_app(settings, debug=debugging())
    if settings.metrics_port is not None:
        from felab_core.ops.metrics import FleetCollector, serve

        serve(settings.metrics_port, settings.metrics_addr, extra=FleetCollector(state.facts))
    try:
        synced = state.sync_users()
    except BrokerUnusable as exc:  # it answered, but not as Redis 7 does, or too slowly
        err(str(exc))
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except Exception as exc:
        err(
            f"could not set up the broker's users ({type(exc).__name__}: {shown(exc, 200)}): "
            "is FELAB_BROKER_URL a user allowed to manage ACL users (`felab broker setup`)?"
        )
        raise typer.Exit(EXIT_USAGE) from None
    if synced.machines:
        log.info("broker users in step with the database: %d machine(s)", synced.machines)
    schedule = settings.data_dir / "ingest-beat-schedule"
    schedule.parent.mkdir(parents=True, exist_ok=True)
    # Celery would log its fatal error with a traceback, then exit 0; and a broker that goes
    # away with a traceback for every beat: both said in one line (traceback with --debug)
    with kept_fatal(state.outage) as fatal:
        app.worker_main(
            worker_args(
                settings,
                [
                    "worker",
                    "-Q",
                    ",".join((INGEST_QUEUE, PAIRING_QUEUE, BEAT_QUEUE)),
                    "-B",
                    "-s",
                    str(schedule),
                    "-n",
                    f"ingest@{socket.gethostname()}",
                    "--pool",
                    "solo",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "--loglevel",
                    loglevel.value,
                ],
            )
        )
    if fatal.exc is not None:  # said in one line by the CLI's boundary (traceback with --debug)
        worded = broker_fault(fatal.exc, settings.broker_prefix)
        if worded is None:
            raise fatal.exc
        raise worded from fatal.exc


def list_cmd(member: str = MEMBER, cohort: int = COHORT) -> None:
    """A member's workers, online or not, when each was last seen, and the target names its
    targets file holds (as the machine last reported them)."""
    from felab_core.jobs.fleet import list_workers, worker_targets

    who = _member(member, cohort)
    with service_errors(), session_scope(sessions()) as session:
        views = list_workers(session, who)
    table = Table(
        "worker", "id", "state", "last seen", "running job", "instructors may use", "targets"
    )
    for v in views:
        known = worker_targets(v.worker)
        state = "removed" if v.worker.status == "removed" else "online" if v.online else "offline"
        table.add_row(
            *map(
                plain,
                (
                    v.worker.name,
                    str(v.worker.id),
                    state,
                    v.last_seen,
                    str(v.running_job or "-"),
                    "yes" if v.worker.allow_instructors else "no",
                    "not reported yet" if known is None else ", ".join(known) or "none",
                ),
            )
        )
    if not views:
        console.print("no workers yet: pair one with `felab worker pair --name NAME`")
        return
    console.print(table)


def jobs_cmd(
    member: str = MEMBER,
    cohort: int = COHORT,
    limit: int = typer.Option(20, min=1, help="How many, newest first."),
) -> None:
    """A member's jobs, newest first: status, progress (requests done of total) and the reason
    a job failed, expired or was cancelled."""
    from felab_core.jobs.queueing import list_jobs

    who = _member(member, cohort)
    with service_errors(), session_scope(sessions()) as session:
        views = list_jobs(session, who, limit=limit)
        rows = [
            (
                str(v.job.id),
                v.worker,
                v.job.target or v.job.server,
                v.job.preset,
                v.job.status,
                v.progress,
                v.job.error or "",
            )
            for v in views
        ]
    if not rows:
        console.print("no jobs yet: ask the bot for /bench, on a paired machine")
        return
    table = Table("job", "worker", "target", "preset", "status", "progress", "reason")
    for row in rows:
        table.add_row(*map(plain, row))
    console.print(table)


def run_cmd(
    target: str = typer.Argument(..., help="A target name from the machine's targets file."),
    on: str | None = typer.Option(
        None, "--on", help="Which of the member's machines (needed when they have several)."
    ),
    spread: int | None = typer.Option(
        None,
        "--spread",
        min=2,
        max=16,
        help="Spread one run over this many of the member's online machines (one load test).",
    ),
    preset: str = typer.Option("quick", help="The measurement preset."),
    concurrency: int | None = typer.Option(None, min=1, help="Users at once."),
    requests: int | None = typer.Option(None, min=1, help="Requests in the run."),
    max_tokens: int | None = typer.Option(None, min=1, help="Longest reply, in tokens."),
    member: str = MEMBER,
    cohort: int = COHORT,
) -> None:
    """Queue a benchmark on a member's machine, as /bench run does in chat; with --spread N,
    one run cut into N slices on N machines that reach the same server, merged when all are in.

    \b
    Examples:
      felab worker run mlx --member 1234 --cohort 1
      felab worker run vllm --spread 2 --concurrency 64 --requests 400 --member 1234 --cohort 1
    """
    from felab_core.jobs.fleet import NoMachine, SeveralMachines, the_machine
    from felab_core.jobs.queueing import job_shape, queue_bench_job
    from felab_core.jobs.spread import queue_spread_job, spread_workers
    from felab_worker.dispatch import Dispatcher

    given = {"concurrency": concurrency, "requests": requests, "max_tokens": max_tokens}
    params = {k: v for k, v in given.items() if v is not None}
    settings = get_settings()
    with service_errors():
        job_shape(target, preset, params, settings)  # a bad option before who and where
    who = _member(member, cohort)
    dispatcher = Dispatcher(settings)
    unsent: list[str] = []

    def send(msg: JobMessage) -> None:
        """Publish after the commit; a broker that does not answer leaves the job queued (the
        ingest's reconciler sends it again), said below, never a crash after the commit."""
        try:
            dispatcher.send(msg)
        except Exception as exc:
            unsent.append(redact(str(exc).strip().splitlines()[0] if str(exc).strip() else ""))

    with service_errors(), session_scope(sessions()) as session:
        owner = session.merge(who)
        if spread is not None:
            if on is not None:
                raise Invalid("--spread picks the member's machines itself: leave out --on")
            machines = spread_workers(session, owner, target, spread)
            queued = queue_spread_job(
                session, owner, machines, target, preset, params=params, send=send
            )
            names = ", ".join(w.name for w in machines)
            said = [f"job {queued.job.id}: {target} spread over {names}: queued", *queued.notices]
        else:
            try:
                worker = the_machine(session, owner, on)
            except NoMachine:
                raise Invalid(
                    "the member has no paired machine: pair one with /worker pair in chat "
                    "(or `felab worker pair --name NAME` here), then `felab worker pair "
                    "--code CODE` on it"
                ) from None
            except SeveralMachines as several:
                listed = ", ".join(several.names)
                raise Invalid(
                    f"the member has several machines ({listed}): pick one with --on"
                ) from None
            one = queue_bench_job(session, owner, worker, target, preset, params=params, send=send)
            said = [
                f"job {one.job.id}: {target} on {worker.name}: queued",
                *filter(None, [one.notice]),
            ]
    for line in said:
        console.print(line, markup=False)
    if unsent:
        err(
            f"the broker did not take the job ({unsent[0] or 'no answer'}): it stays queued, and "
            "the ingest sends it again once the broker answers (`felab status` shows the broker)"
        )
        raise typer.Exit(EXIT_UNREACHABLE)
    console.print("`felab worker jobs` shows its progress; the result is posted by the bot.")


def cancel_cmd(
    job_id: int = typer.Argument(..., help="The job's number (`felab worker jobs`)."),
    member: str = MEMBER,
    cohort: int = COHORT,
) -> None:
    """Cancel a queued or running job: a queued one is dropped, a running one is stopped on the
    machine within seconds (it watches its control list)."""
    from felab_core.jobs.queueing import cancel_job, deliveries
    from felab_worker.dispatch import Dispatcher

    who = _member(member, cohort)
    with service_errors(), session_scope(sessions()) as session:
        job = cancel_job(session, who, job_id)
        sent, was_running = deliveries(session, job), job.started_at is not None
    try:
        dispatcher = Dispatcher(get_settings())
        for one_job, worker_id in sent:
            dispatcher.cancel(one_job, worker_id)
    except Exception as exc:  # the broker down: the attempt check still drops its events
        console.print(f"(the broker did not answer: {type(exc).__name__}; the job is cancelled)")
    if was_running:
        console.print(f"job {job_id} cancelled: its machine stops the run within seconds")
    else:
        console.print(f"job {job_id} cancelled")


def remove_cmd(
    name: str = typer.Argument(..., help="The machine's worker name."),
    member: str = MEMBER,
    cohort: int = COHORT,
) -> None:
    """Revoke a machine (a lost laptop, a student who left): its key and broker user stop
    working at once, its live connections are dropped, its queued jobs are cancelled."""
    from felab_core.jobs.fleet import find_worker
    from felab_core.jobs.pairing import remove_worker
    from felab_worker.dispatch import Dispatcher

    who = _member(member, cohort)
    with service_errors(), session_scope(sessions()) as session:
        actor = session.merge(who)
        worker = find_worker(session, actor, name)
        remove_worker(session, actor, worker)
        worker_id = worker.id
    try:
        Dispatcher(get_settings()).remove_machine(worker_id)
    except Exception as exc:
        err(
            f"{name} is removed in the database, but the broker did not answer ({exc}): its "
            "user goes at the ingest's next start, or run `felab broker setup`"
        )
        raise typer.Exit(EXIT_UNREACHABLE) from None
    console.print(f"removed {name} (worker {worker_id}): its key and broker user no longer work")


def allow_instructors_cmd(
    name: str = typer.Argument(..., help="Your machine's worker name."),
    allow: bool = typer.Option(
        ..., "--yes/--no", help="Whether your cohort's instructors may run jobs on it."
    ),
    member: str = typer.Option(None, "--member", help="The owner's Discord id."),
    cohort: int = typer.Option(None, "--cohort", help="The owner's cohort id."),
) -> None:
    """The owner's consent: may the cohort's instructors run benchmarks on this machine?"""
    from felab_core.jobs.fleet import find_worker, set_allow_instructors

    who = _member(member, cohort)
    with service_errors(), session_scope(sessions()) as session:
        owner = session.merge(who)
        worker = find_worker(session, owner, name)
        set_allow_instructors(session, owner, worker, allow)
    if allow:
        console.print(f"instructors may now run jobs on {name}")
    else:
        console.print(f"only you may run jobs on {name} now")


def outbox_cmd(
    retry: int = typer.Option(None, "--retry", help="Post this dead letter again (its id)."),
) -> None:
    """Finished jobs Discord refused to post (dead letters), with the last error; `--retry ID`
    hands one back to the bot."""
    from felab_core.jobs.outbox import dead_letters, retry_dead

    with service_errors(), session_scope(sessions()) as session:
        if retry is not None:
            retry_dead(session, retry)
            console.print(f"outbox entry {retry} goes to the bot again at its next look")
            return
        rows = [
            (str(r.id), str(r.job_id), str(r.attempts), r.last_error or "")
            for r in dead_letters(session)
        ]
    if not rows:
        console.print("no dead letters: every finished job was posted")
        return
    table = Table("entry", "job", "tries", "last error")
    for row in rows:
        table.add_row(*map(plain, row))
    console.print(table)

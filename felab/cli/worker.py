"""`felab worker`: run a student worker or the trusted ingest, pair machines, list them.

`start` and `pair --code` run on the student's machine and never touch the database; `ingest`,
`pair` (issuing a code) and `list` run on the instructor's side. Celery is imported only inside
the commands, so the rest of felab starts without it.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from felab.cli.db import EXIT_USAGE, err, service_errors, sessions
from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.db.types import utcnow
from felab_core.errors import Invalid
from felab_core.jobs.keys import Identity, new_private_key, public_key_text, sign
from felab_core.jobs.messages import INGEST_QUEUE, host_queue
from felab_core.settings import Settings, get_settings

worker_app = typer.Typer(
    name="worker",
    help="The worker fleet: benchmark jobs from chat, run on students' own machines.",
    no_args_is_help=True,
)
console = Console(highlight=False)


def key_file(settings: Settings, name: str) -> Path:
    """Where a machine keeps its identity: FELAB_WORKER_KEY_FILE, else DATA_DIR/worker-NAME.json."""
    return settings.worker_key_file or settings.data_dir / f"worker-{name}.json"


def default_pool() -> str:
    """solo on macOS (fork is unsafe there with Apple's frameworks loaded), prefork elsewhere
    (a lost pool child is then noticed and its job handed back)."""
    return "solo" if sys.platform == "darwin" else "prefork"


@worker_app.command("start")
def start(
    name: str = typer.Option(..., "--name", help="This machine's worker name, as paired."),
    pool: str = typer.Option("", help="Celery pool: solo, threads or prefork (default per OS)."),
    loglevel: str = typer.Option("INFO", help="Celery log level."),
) -> None:
    """Run this machine's worker: it takes jobs from its own queue only and times the servers
    named in its targets file (FELAB_TARGETS_FILE)."""
    from felab_worker import student
    from felab_worker.app import app

    settings = get_settings()
    try:
        identity = Identity.load(key_file(settings, name))
    except Invalid as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    if identity.name != name:
        err(f"{key_file(settings, name)} is the identity of {identity.name!r}, not {name!r}")
        raise typer.Exit(EXIT_USAGE)
    student.configure(app, identity, settings)
    app.worker_main(
        [
            "worker",
            "-Q",
            host_queue(identity.worker_id),
            "-n",
            f"{name}-{identity.worker_id}@{socket.gethostname()}",
            "--pool",
            pool or default_pool(),
            "--concurrency",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            loglevel,
        ]
    )


@worker_app.command("ingest")
def ingest(
    loglevel: str = typer.Option("INFO", help="Celery log level."),
) -> None:
    """Run the trusted ingest: the one process that writes job progress and results to the
    database, with the reconciler beating inside it."""
    from felab_worker.app import app

    settings = get_settings()
    sessions()  # the schema is checked now, not at the first event
    schedule = settings.data_dir / "ingest-beat-schedule"
    schedule.parent.mkdir(parents=True, exist_ok=True)
    app.worker_main(
        [
            "worker",
            "-Q",
            INGEST_QUEUE,
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
            loglevel,
        ]
    )


def _member(discord_id: str | None, cohort_id: int | None) -> m.Member:
    from felab_core.people.service import ensure_local_member, find_member

    factory = sessions()
    with service_errors(), session_scope(factory) as session:
        if discord_id is None:
            return ensure_local_member(session, now=utcnow())
        if cohort_id is None:
            raise Invalid("give --cohort with --member")
        member = find_member(session, cohort_id, discord_id)
        if member is None:
            raise Invalid(f"no member {discord_id} in cohort {cohort_id}")
        return member


@worker_app.command("pair")
def pair(
    code: str = typer.Option(None, "--code", help="On the machine: redeem the bot's code."),
    name: str = typer.Option(None, "--name", help="On the server: the machine's worker name."),
    allow_instructors: bool = typer.Option(
        False, "--allow-instructors", help="On the server: instructors may run jobs on it."
    ),
    member: str = typer.Option(None, "--member", help="On the server: the member's Discord id."),
    cohort: int = typer.Option(None, "--cohort", help="On the server: the member's cohort id."),
    timeout: float = typer.Option(30.0, help="Seconds to wait for the ingest's answer."),
) -> None:
    """Pair a machine. On the server (or the bot's /worker pair): issue a one-time code. On the
    machine: `--code CODE` makes a key pair, sends the public half and keeps the private one."""
    settings = get_settings()
    if code is None:
        if name is None:
            err("give --name NAME to issue a code, or --code CODE to redeem one on the machine")
            raise typer.Exit(EXIT_USAGE)
        from felab_core.jobs.pairing import issue_pair_code

        who = _member(member, cohort)
        with service_errors(), session_scope(sessions()) as session:
            issued = issue_pair_code(
                session, who, name, allow_instructors=allow_instructors, settings=settings
            )
        console.print(issued)
        return
    from felab_core.jobs.run import target_names
    from felab_worker.app import app

    key = new_private_key()
    names = target_names(settings.targets_file)  # names and kinds only: URLs stay here
    request_body: dict[str, object] = {"code": code.strip(), "public_key": public_key_text(key)}
    if names is not None:
        request_body["targets"] = names
    request = sign(request_body, key)
    try:
        reply = app.send_task("felab.pair", args=[request], queue=INGEST_QUEUE).get(timeout=timeout)
    except Exception as exc:
        err(f"no answer from the ingest ({type(exc).__name__}: {exc}): check FELAB_BROKER_URL")
        raise typer.Exit(EXIT_USAGE) from None
    if "error" in reply:
        err(str(reply["error"]))
        raise typer.Exit(EXIT_USAGE)
    identity = Identity(int(reply["worker_id"]), str(reply["name"]), key)
    path = key_file(settings, identity.name)
    identity.save(path)
    console.print(
        f"paired as {identity.name} (worker {identity.worker_id}); key kept in {path}. "
        f"Start it with: felab worker start --name {identity.name}"
    )


@worker_app.command("list")
def list_cmd(
    member: str = typer.Option(None, "--member", help="The member's Discord id."),
    cohort: int = typer.Option(None, "--cohort", help="The member's cohort id."),
) -> None:
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
        table.add_row(
            v.worker.name,
            str(v.worker.id),
            "online" if v.online else "offline",
            v.last_seen,
            str(v.running_job or "-"),
            "yes" if v.worker.allow_instructors else "no",
            "not reported yet" if known is None else ", ".join(known) or "none",
        )
    if not views:
        console.print("no workers yet: pair one with `felab worker pair --name NAME`")
        return
    console.print(table)


@worker_app.command("jobs")
def jobs_cmd(
    member: str = typer.Option(None, "--member", help="The member's Discord id."),
    cohort: int = typer.Option(None, "--cohort", help="The member's cohort id."),
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
        table.add_row(*row)
    console.print(table)


@worker_app.command("cancel")
def cancel_cmd(
    job_id: int = typer.Argument(..., help="The job's number (`felab worker jobs`)."),
    member: str = typer.Option(None, "--member", help="The member's Discord id."),
    cohort: int = typer.Option(None, "--cohort", help="The member's cohort id."),
) -> None:
    """Cancel a queued or running job. A queued one is dropped when its worker takes it; a
    running one finishes on the machine, but what it reports afterwards is ignored."""
    from felab_core.jobs.queueing import cancel_job

    who = _member(member, cohort)
    with service_errors(), session_scope(sessions()) as session:
        job = cancel_job(session, who, job_id)
        was_running = job.started_at is not None
    try:
        from felab_worker.dispatch import Dispatcher

        Dispatcher(get_settings()).withdraw(job_id)
    except Exception as exc:  # the broker down: the attempt check still drops its events
        console.print(f"(the broker did not answer: {type(exc).__name__}; the job is cancelled)")
    if was_running:
        console.print(
            f"job {job_id} cancelled: the run goes on to its end on the machine, and what it "
            "reports is ignored"
        )
    else:
        console.print(f"job {job_id} cancelled")


@worker_app.command("allow-instructors")
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

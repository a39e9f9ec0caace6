"""The demo's second half: the whole job path on embedded defaults, with real processes.

SQLite for the database and kombu's SQLAlchemy transport on SQLite for the broker (both in one
data folder), one `felab worker ingest` and one `felab worker start` subprocess, the worker
paired through the broker, a benchmark queued with the same service call the bot's /bench
makes, then the finished job rendered as the bot posts it, its chart and CSV row written to the
results folder, and today's drill cards. Every process it starts runs in its own process group
and is stopped on the way out, whatever happened (Ctrl-C included).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from felab_core.content.calendar import set_manual_day, today_plan
from felab_core.content.loader import ContentError
from felab_core.content.store import load_folder
from felab_core.content.view import CardView, card_view
from felab_core.db import models as m
from felab_core.db.session import ensure_schema, make_engine, session_factory, session_scope
from felab_core.drills.review import cards_due
from felab_core.engine.results import append_csv
from felab_core.jobs.outbox import claim_outbox, mark_posted
from felab_core.jobs.pairing import issue_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.jobs.render import RenderedJob, render_job
from felab_core.people.members import ensure_local_member
from felab_core.settings import Settings

Log = Callable[[str], None]
WORKER_NAME = "demo-laptop"
DEMO_DAY = 2  # the course day the demo shows (the lab's content is Day 2)


class FleetDemoError(Exception):
    """A step of the job path failed; the message says which, with the process's log tail."""


@dataclass
class Cards:
    plan: str
    cards: list[tuple[str, CardView]] = field(default_factory=list)  # (kind, card)


@dataclass
class FleetDemoResult:
    post: RenderedJob | None = None
    cards: Cards | None = None
    chart: Path | None = None
    csv: Path | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # step -> wall time


def felab_command() -> list[str]:
    """This felab, as a command line: the script beside this Python, else `python -m`."""
    script = Path(sys.executable).with_name("felab")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "felab"]


def child_env(data_dir: Path, targets_file: Path) -> dict[str, str]:
    """The embedded defaults for the demo's processes: no FELAB_ setting leaks in from outside
    (a FELAB_DATABASE_URL or FELAB_BROKER_URL in the shell would send them elsewhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
    env.update(
        {
            "FELAB_DATA_DIR": str(data_dir),
            "FELAB_TARGETS_FILE": str(targets_file),
            "FELAB_WORKER_HEARTBEAT_S": "1",
            "FELAB_RECONCILE_EVERY_S": "2",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to its process group (Celery's warm shutdown), SIGKILL after `grace_s`."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
            except ProcessLookupError:
                pass
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # pool children left behind, if any
        if self.popen.poll() is None:
            self.popen.wait(10)


class Children:
    """The processes the demo started; `stop_all` ends every one of them."""

    def __init__(self, env: dict[str, str], logs: Path, log: Log) -> None:
        self.env = env
        self.logs = logs
        self.say = log
        self.running: list[Child] = []

    def start(self, name: str, args: list[str]) -> Child:
        path = self.logs / f"{name}.log"
        self.say("$ felab " + " ".join(args) + f"   (log: {path})")
        with path.open("ab") as fh:
            popen = subprocess.Popen(
                [*felab_command(), *args],
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the demo, which then stops them
            )
        child = Child(name, popen, path)
        self.running.append(child)
        return child

    def check_alive(self) -> None:
        for child in self.running:
            if child.popen.poll() is not None:
                raise FleetDemoError(
                    f"`felab worker {child.name}` exited (code {child.popen.returncode}):\n"
                    + child.tail()
                )

    def stop_all(self) -> None:
        while self.running:
            child = self.running.pop()
            child.stop()
            self.say(f"stopped felab worker {child.name} (pid {child.popen.pid})")


@contextmanager
def _database(settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(settings.resolved_database_url())
    try:
        ensure_schema(engine)
        yield session_factory(engine)
    finally:
        engine.dispose()


def _wait(pred: Callable[[], bool], timeout: float, what: str, children: Children) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        children.check_alive()
        if pred():
            return
        time.sleep(0.2)
    tails = "".join(f"\n--- {c.log} ---\n{c.tail()}" for c in children.running)
    raise FleetDemoError(f"timed out after {timeout:.0f} s waiting for {what}{tails}")


def todays_cards(session: Session, member: m.Member, now: datetime) -> Cards:
    plan = today_plan(session, member.cohort, now)
    due = cards_due(session, member, now)
    return Cards(plan.message, [(d.kind, card_view(d.card)) for d in due])


def run_fleet_demo(
    *,
    llama_url: str,
    data_dir: Path,
    results_dir: Path,
    csv_path: Path,
    content_dir: Path,
    quick: bool,
    log: Log = print,
    timeout_s: float = 180.0,
) -> FleetDemoResult:
    """Pair a worker, run one benchmark of `llama_url` through the fleet, render it as the bot.

    `data_dir` holds the SQLite database, the broker, the worker's key and the processes' logs.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    out = FleetDemoResult()
    targets_file = data_dir / "targets.toml"
    # The worker's own targets file names the server; the job names only "llamacpp".
    targets_file.write_text(f'[targets.llamacpp]\nurl = "{llama_url}"\n')
    # Embedded defaults whatever the shell says (FELAB_BROKER_URL, FELAB_DATABASE_URL...):
    # the same settings the child processes get from child_env.
    settings = Settings.model_construct(data_dir=data_dir, targets_file=targets_file)
    children = Children(child_env(data_dir, targets_file), data_dir, log)
    t0 = time.monotonic()
    try:
        with _database(settings) as sessions:
            now = datetime.now(UTC)
            with session_scope(sessions) as s:
                try:
                    load_folder(s, content_dir)
                except ContentError as exc:
                    raise FleetDemoError(
                        f"could not load the course content from {content_dir}: {exc} "
                        "(run the demo from the checkout, or set FELAB_CONTENT_DIR)"
                    ) from None
                me = ensure_local_member(s, now=now)
                set_manual_day(s, me.cohort, DEMO_DAY)
                code = issue_pair_code(s, me, WORKER_NAME, settings=settings)
                member_id = me.id
            log(f"database and broker: SQLite in {data_dir}; content loaded from {content_dir}")
            children.start("ingest", ["worker", "ingest", "--loglevel", "WARNING"])
            pairing = subprocess.run(
                [*felab_command(), "worker", "pair", "--code", code, "--timeout", "60"],
                env=children.env,
                capture_output=True,
                text=True,
                timeout=90,
            )
            if pairing.returncode != 0:
                children.check_alive()
                raise FleetDemoError("pairing failed: " + (pairing.stderr or pairing.stdout))
            log(f"$ felab worker pair --code {code}\n{pairing.stdout.strip()}")
            children.start(
                "start", ["worker", "start", "--name", WORKER_NAME, "--loglevel", "WARNING"]
            )

            def online() -> bool:
                with session_scope(sessions) as s:
                    w = s.scalar(select(m.Worker).where(m.Worker.name == WORKER_NAME))
                    return w is not None and w.last_seen_at is not None

            _wait(online, timeout_s, "the worker's first heartbeat", children)
            out.seconds["processes up and paired"] = time.monotonic() - t0

            from felab_worker.dispatch import Dispatcher  # Celery only now, as the bot does

            t1 = time.monotonic()
            preset = "quick" if quick else "day2"
            with session_scope(sessions) as s:
                member = s.get(m.Member, member_id)
                worker = s.scalar(select(m.Worker).where(m.Worker.name == WORKER_NAME))
                assert member is not None and worker is not None
                queued = queue_bench_job(
                    s,
                    member,
                    worker,
                    "llamacpp",
                    preset,
                    send=Dispatcher(settings).send,
                    settings=settings,
                )
                job_id = queued.job.id
            log(
                f"queued job {job_id}: llamacpp on {WORKER_NAME}, preset {preset} "
                "(queue_bench_job, the call /bench makes)"
            )

            def finished() -> bool:
                with session_scope(sessions) as s:
                    job = s.get(m.BenchJob, job_id)
                    return job is not None and job.status not in ("queued", "running")

            _wait(finished, timeout_s, f"job {job_id} to finish", children)
            out.seconds["job queued to result"] = time.monotonic() - t1
            # The bot's outbox loop: claim, post, mark posted.
            with session_scope(sessions) as s:
                for entry in claim_outbox(s):
                    job = s.get(m.BenchJob, entry.job_id)
                    assert job is not None
                    rendered = render_job(s, job)
                    mark_posted(s, entry.id, message_ref="terminal")
                    if job.id == job_id:
                        out.post = rendered
            with session_scope(sessions) as s:
                member = s.get(m.Member, member_id)
                assert member is not None
                out.cards = todays_cards(s, member, datetime.now(UTC))
    finally:
        children.stop_all()
    post = out.post
    if post is None:
        raise FleetDemoError(f"job {job_id} finished but the outbox did not hand it out")
    if post.status != "done":
        return out
    if post.chart_png:
        results_dir.mkdir(parents=True, exist_ok=True)
        out.chart = results_dir / "demo-chart.png"
        out.chart.write_bytes(post.chart_png)
    append_csv(csv_path, post.rows)
    out.csv = csv_path
    return out

"""`felab worker`: the worker fleet. On a student's machine: `pair --code`, `start`,
`identity`. On the instructor's server: `ingest`, `list`, `jobs`, `run`, `cancel`, `remove`,
`allow-instructors`, `outbox`, `pair --name` (felab/cli/fleet.py, loaded only when used).

The machine's commands load neither the database nor the bot: `felab worker start` on a Mac
needs httpx, Celery and its own key, nothing more.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from felab.cli.errors import EXIT_UNREACHABLE, EXIT_USAGE, err
from felab.cli.lazy import Entry, lazy_group
from felab.cli.output import LogLevel
from felab_core.errors import ServiceError
from felab_core.jobs.handshake import check_code_shape
from felab_core.jobs.keys import Identity, check_identity_destination, check_worker_name
from felab_core.settings import Settings, get_settings

SERVER_COMMANDS = {
    "ingest": Entry("felab.cli.fleet:ingest"),
    "list": Entry("felab.cli.fleet:list_cmd"),
    "jobs": Entry("felab.cli.fleet:jobs_cmd"),
    "run": Entry("felab.cli.fleet:run_cmd"),
    "cancel": Entry("felab.cli.fleet:cancel_cmd"),
    "remove": Entry("felab.cli.fleet:remove_cmd"),
    "allow-instructors": Entry("felab.cli.fleet:allow_instructors_cmd"),
    "outbox": Entry("felab.cli.fleet:outbox_cmd"),
}

worker_app = typer.Typer(
    name="worker",
    cls=lazy_group(SERVER_COMMANDS),
    help="The worker fleet: benchmark jobs from chat, run on students' own machines.",
    no_args_is_help=True,
)
console = Console(highlight=False, soft_wrap=True)  # URLs and paths are copied: never cut


def key_file(settings: Settings, name: str) -> Path:
    """Where a machine keeps its identity: FELAB_WORKER_KEY_FILE, else DATA_DIR/worker-NAME.json
    (the name checked first: it becomes part of a path)."""
    try:
        check_worker_name(name)
    except ServiceError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    return settings.worker_key_file or settings.data_dir / f"worker-{name}.json"


def _identity(settings: Settings, name: str) -> Identity:
    path = key_file(settings, name)
    try:
        identity = Identity.load(path)
    except ServiceError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    if identity.name != name:
        err(f"{path} is the identity of {identity.name!r}, not {name!r}")
        raise typer.Exit(EXIT_USAGE)
    return identity


class Pool(StrEnum):
    """The Celery pools a machine's worker runs on (gevent and eventlet are not installed)."""

    SOLO = "solo"
    THREADS = "threads"
    PREFORK = "prefork"


@worker_app.command("start")
def start(
    name: str = typer.Option(..., "--name", help="This machine's worker name, as paired."),
    pool: Pool | None = typer.Option(
        None, case_sensitive=False, help="Celery pool (default: solo on macOS, else prefork)."
    ),
    loglevel: LogLevel = typer.Option(
        LogLevel.WARNING,
        case_sensitive=False,
        help="Level of Celery's own logs (felab's: FELAB_LOG_LEVEL).",
    ),
) -> None:
    """Run this machine's worker: it takes jobs from its own queue only and times the servers
    named in its targets file (FELAB_TARGETS_FILE). It connects as its own broker user (from
    `felab worker pair`), never with the pairing URL. With FELAB_METRICS_PORT it serves its
    Prometheus metrics there."""
    settings = get_settings()
    if settings.metrics_port is not None:
        # Before prometheus-client is imported: pool children write their counts to files.
        folder = key_file(settings, name).with_name(f"worker-{name}.state") / "metrics"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    from felab.cli.boundary import debugging
    from felab_core.ops import logs
    from felab_worker import login, machine
    from felab_worker.answers import BrokerUnusable
    from felab_worker.broker import broker_url, is_redis

    logs.setup(settings, level=loglevel.value)

    identity = _identity(settings, name)
    if identity.broker_url is None and is_redis(broker_url(settings)):
        err(
            f"{key_file(settings, name)} holds no broker user of its own (paired with an older "
            "felab): pair this machine again with `felab worker pair --code CODE`"
        )
        raise typer.Exit(EXIT_USAGE)
    try:
        login.check_login(identity, settings)  # before its state folder is made
    except ServiceError as exc:  # a broker that answers as no Redis does: nothing to retype
        err(str(exc))
        raise typer.Exit(
            EXIT_UNREACHABLE if isinstance(exc, BrokerUnusable) else EXIT_USAGE
        ) from None
    rt = machine.configure(identity, key_file(settings, name), settings)
    if settings.metrics_port is not None:
        from felab_core.ops.metrics import serve

        serve(settings.metrics_port, settings.metrics_addr)
    # A fatal error of Celery's is raised here and said in one line by the CLI's boundary.
    machine.start(
        rt, settings, pool=pool.value if pool else "", loglevel=loglevel.value, debug=debugging()
    )


def _pair_wait(value: float) -> float:
    """1 to 3600 s; NaN fails every comparison, so it is named for what it is."""
    if not math.isfinite(value) or not 1 <= value <= 3600:
        raise typer.BadParameter(f"{value:g} is not a wait felab takes: give 1 to 3600 seconds")
    return value


@worker_app.command("pair")
def pair(
    code: str = typer.Option(None, "--code", help="On the machine: redeem the bot's code."),
    name: str = typer.Option(None, "--name", help="On the server: the machine's worker name."),
    allow_instructors: bool = typer.Option(
        False, "--allow-instructors", help="On the server: instructors may run jobs on it."
    ),
    member: str = typer.Option(None, "--member", help="On the server: the member's Discord id."),
    cohort: int = typer.Option(None, "--cohort", help="On the server: the member's cohort id."),
    timeout: float = typer.Option(
        30.0,
        help="Seconds to wait for the ingest's answer (1 to 3600).",
        callback=_pair_wait,
    ),
) -> None:
    """Pair a machine. On the server (or the bot's /worker pair): issue a one-time code. On the
    machine: `--code CODE`, with FELAB_BROKER_URL set to the pairing URL from your instructor,
    makes a key pair, proves it holds the code (which never travels), and keeps the machine's
    own broker user and key."""
    settings = get_settings()
    if code is not None and name is not None:
        err(
            "--name issues a code on the server; --code redeems one on the machine (the name "
            "comes with the code): give one"
        )
        raise typer.Exit(EXIT_USAGE)
    if code is None:
        if name is None:
            err("give --name NAME to issue a code, or --code CODE to redeem one on the machine")
            raise typer.Exit(EXIT_USAGE)
        from felab.cli import fleet  # the server's side: the database

        console.print(fleet.issue_code(name, member, cohort, allow_instructors, settings))
        return
    from felab_worker.answers import BrokerUnusable
    from felab_worker.pairing import BrokerUnreachable, pair_machine

    try:
        check_code_shape(code)  # a typo is said before the wait, not after it
        check_identity_destination(settings.worker_key_file, settings.data_dir)
    except ServiceError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    local = settings.broker_url is None
    where = (
        " on this machine's embedded broker (FELAB_BROKER_URL is unset: a code from your "
        "cohort's bot needs the pairing URL your instructor gave, in FELAB_BROKER_URL)"
        if local
        else ""
    )
    Console(stderr=True, highlight=False).print(
        f"pairing{where}: waiting up to {timeout:g} s for the ingest's answer ...",
        markup=False,
        soft_wrap=True,
    )
    try:
        identity = pair_machine(settings, code, timeout_s=timeout)
    except ServiceError as exc:
        err(
            f"{exc} (FELAB_BROKER_URL is unset: this asked the embedded broker on this machine)"
            if local
            else str(exc)
        )
        unusable = isinstance(exc, BrokerUnreachable | BrokerUnusable)  # nothing to retype
        raise typer.Exit(EXIT_UNREACHABLE if unusable else EXIT_USAGE) from None
    path = key_file(settings, identity.name)
    try:
        identity.save(path)
    except OSError as exc:  # checked before the code was sent: changed since
        err(
            f"the code was used: this machine is paired as {identity.name}, but its key could "
            f"not be saved in {path} ({exc.strerror or exc}): make that folder writable, then "
            "ask for a new code and pair again (the new pairing replaces this one)"
        )
        raise typer.Exit(EXIT_USAGE) from None
    console.print(
        f"paired as {identity.name} (worker {identity.worker_id}); key and broker user kept in "
        f"{path}. Start it with: felab worker start --name {identity.name}"
    )


@worker_app.command("identity")
def identity_cmd(
    name: str = typer.Option(..., "--name", help="This machine's worker name, as paired."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON: worker_id, name, broker_url."),
    show_password: bool = typer.Option(
        False, "--show-password", help="Print the broker URL with its password (it is yours)."
    ),
) -> None:
    """Who this machine is to the fleet: its worker id, name and own broker URL (password
    hidden unless asked)."""
    from felab_worker.broker import broker_url, redacted

    settings = get_settings()
    ident = _identity(settings, name)
    url = ident.broker_url or broker_url(settings)
    shown = url if show_password else redacted(url)
    if as_json:
        typer.echo(
            json.dumps({"worker_id": ident.worker_id, "name": ident.name, "broker_url": shown})
        )
        return
    console.print(
        f"worker {ident.worker_id} ({ident.name})\nbroker: {shown}\n"
        f"identity file: {key_file(settings, name)}",
        markup=False,
    )


service_app = typer.Typer(
    name="service",
    help="Run this machine's worker as a service (launchd on macOS, a systemd user unit on "
    "Linux): started at login, restarted when it fails or the machine wakes.",
    no_args_is_help=True,
)
worker_app.add_typer(service_app)
NAME = typer.Option(..., "--name", help="This machine's worker name, as paired.")
DRY = typer.Option(False, "--dry-run", help="Print the service file; change nothing.")
PLATFORM = typer.Option(
    None, "--platform", help="darwin or linux (default: this machine's), for --dry-run."
)


def _service(name: str, platform: str | None) -> Any:
    from felab_worker.autostart import service_file

    settings = get_settings()
    _identity(settings, name)  # paired first: the service starts what pairing made
    return service_file(settings, name, key_file(settings, name), platform=platform)


@service_app.command("install")
def service_install(name: str = NAME, dry_run: bool = DRY, platform: str = PLATFORM) -> None:
    """Write the service file (no secret in it: it points at the identity file) and start it."""
    from felab_worker.autostart import ServiceError, install

    svc = _service(name, platform)
    if dry_run:
        typer.echo(svc.text, nl=False)
        return
    try:
        install(svc)
    except ServiceError as exc:
        err(f"{exc}; the file is at {svc.path}: start it by hand, or run `felab worker start`")
        raise typer.Exit(EXIT_UNREACHABLE) from None  # the service manager, not the input
    console.print(f"installed and started {svc.label} ({svc.path})", markup=False)


@service_app.command("uninstall")
def service_uninstall(name: str = NAME) -> None:
    """Stop the service and remove its file (the identity stays: `felab worker start` works)."""
    from felab_worker.autostart import ServiceError, uninstall

    svc = _service(name, None)
    try:
        removed = uninstall(svc)
    except ServiceError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_UNREACHABLE) from None  # the service manager, not the input
    if not removed:
        console.print(f"not installed ({svc.path} is absent): nothing to remove", markup=False)
        return
    console.print(f"removed {svc.label}", markup=False)


@service_app.command("status")
def service_status(name: str = NAME) -> None:
    """Whether the service is installed and running, as the service manager says."""
    from felab_worker.autostart import ServiceError, status

    svc = _service(name, None)
    try:
        console.print(status(svc), markup=False)
    except ServiceError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_UNREACHABLE) from None  # the service manager, not the input

"""`felab broker`: felab's users on the broker, and what students need to reach it.

Run on the trusted side, with FELAB_BROKER_URL naming a Redis user allowed to manage ACL users
(and FELAB_DATABASE_URL the fleet's database).
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console

from felab.cli.db import service_errors, sessions
from felab.cli.errors import EXIT_UNREACHABLE, EXIT_USAGE, err
from felab.cli.folders import folder_parser
from felab_core.db.session import session_scope
from felab_core.errors import Invalid, ServiceError
from felab_core.settings import Settings, get_settings
from felab_core.text import echo_of

if TYPE_CHECKING:
    from felab_worker.acl import MemoryCap

broker_app = typer.Typer(
    name="broker",
    help="The broker (Redis): felab's users on it, and the pairing URL students set.",
    no_args_is_help=True,
)
console = Console(highlight=False, soft_wrap=True)  # URLs and paths are copied: never cut


def public_url(settings: Settings) -> str:
    """The broker as students reach it, with no user: FELAB_BROKER_PUBLIC_URL, else
    FELAB_BROKER_URL's scheme, host, port and database."""
    from felab_worker.broker import broker_url

    url = settings.broker_public_url or broker_url(settings)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    # No query or fragment: the admin URL's ?password=... must never reach the students' URL.
    return urlunsplit(parts._replace(netloc=f"{host}{port}", query="", fragment=""))


def _size(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n % 2**30 == 0 else f"{n / 2**20:,.4g} MiB"


def memory_words(memory: MemoryCap | None) -> str:
    """What `broker setup` says of Redis's memory cap (acl.cap_memory)."""
    if memory is None:
        return (
            "Redis would not say its maxmemory (CONFIG refused): cap it there (maxmemory, with "
            "maxmemory-policy noeviction), or one machine's pushes can fill the host's memory"
        )
    if memory.set_now:
        return (
            f"Redis had no memory cap (maxmemory 0): set to {_size(memory.bytes)}, refusing "
            "writes when full (noeviction); FELAB_BROKER_MAX_MEMORY_BYTES sets another"
        )
    said = f"Redis's memory cap is {_size(memory.bytes)} (maxmemory, set there): left as it is"
    if memory.evicts:
        said += (
            f"; its policy {memory.policy[:40]} drops keys when full, felab's queued jobs among "
            "them: set maxmemory-policy noeviction"
        )
    return said


#: Seconds for all of `broker setup`'s commands after the reachability check (the machines'
#: users go in one pipeline: hundreds cost one round trip).
_SETUP_WITHIN_S = 20.0


@broker_app.command("setup")
def setup(
    as_json: bool = typer.Option(False, "--json", help="Print JSON (pairing_url and counts)."),
    rotate_pairing: bool = typer.Option(
        False, "--rotate-pairing", help="Make a new pairing password (the old URL stops working)."
    ),
) -> None:
    """Create felab's Redis users: the pairing user every unpaired machine shares, and one user
    per paired machine (from the database, which keeps only the machines' password hashes; the
    shared pairing password is kept as it is, to print the pairing URL again: it lets a machine
    only redeem a code, and --rotate-pairing replaces it). Safe to re-run,
    after a Redis restart too. Prints the pairing URL students set as FELAB_BROKER_URL before
    `felab worker pair --code CODE`."""
    from redis.exceptions import RedisError

    from felab_core.jobs.pairing import (
        check_credentials,
        machine_credentials,
        pairing_password,
        pairing_secret_hash,
    )
    from felab_worker.answers import BrokerUnusable, failure
    from felab_worker.broker import is_redis, with_credentials
    from felab_worker.dispatch import Dispatcher
    from felab_worker.pairing import BrokerUnreachable, check_reachable

    settings = get_settings()
    # one budget for every command of the setup: a broker answering a byte every 2 s ran on
    dispatcher = Dispatcher(settings, within_s=_SETUP_WITHIN_S)
    if not is_redis(dispatcher.url):
        err(
            "the embedded broker has no users to set up: set FELAB_BROKER_URL to the Redis your "
            "students' machines will reach (a user allowed to manage ACL users)"
        )
        raise typer.Exit(EXIT_USAGE)
    try:  # before the database: a broker that is down leaves nothing half made
        check_reachable(
            dispatcher.url,
            settings,
            timeout_s=5.0,
            advice="is Redis running, and does FELAB_BROKER_URL name it (with felab's admin user)?",
        )
    except BrokerUnreachable as exc:
        err(str(exc))
        raise typer.Exit(EXIT_UNREACHABLE) from None
    with service_errors(), session_scope(sessions()) as session:
        # The broker's users are made inside the unit of work: if it refuses them, a pairing
        # password made just now is rolled back, not left behind.
        password = pairing_password(session, rotate=rotate_pairing)
        pairing_hash = pairing_secret_hash(session)
        check_credentials(session)  # a hash Redis refuses is the database's, not the port's
        machines = machine_credentials(session)
        try:
            synced = dispatcher.sync_users(pairing_hash, machines)
        except (RedisError, ServiceError) as exc:
            fault = failure(exc, dispatcher.url, "felab's ACL commands", settings.broker_prefix)
            if isinstance(fault, BrokerUnusable):  # not Redis 7, or it stopped answering
                err(str(fault))
                raise typer.Exit(EXIT_UNREACHABLE) from None
            err(
                f"{fault}; to make users it must be one allowed to run ACL SETUSER (the "
                "README's Security section shows one)"
            )
            raise typer.Exit(EXIT_USAGE) from None
    url = with_credentials(public_url(settings), dispatcher.names.pairing_user, password)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "pairing_url": url,
                    "pairing_user": dispatcher.names.pairing_user,
                    "machines": synced.machines,
                    "removed": synced.removed,
                    "push_cap_bytes": synced.push_cap,
                    "memory_cap_bytes": synced.memory.bytes if synced.memory else None,
                    "memory_policy": synced.memory.policy if synced.memory else None,
                    "memory_cap_set": synced.memory.set_now if synced.memory else False,
                }
            )
        )
        return
    console.print(
        f"broker users ready: pairing, and {synced.machines} paired "
        f"machine{'' if synced.machines == 1 else 's'}"
        + (f"; {synced.removed} stale user(s) removed" if synced.removed else "")
        + (
            f"\nmessages over {synced.push_cap / 2**20:g} MiB are refused by Redis"
            if synced.push_cap is not None
            else "\nRedis would not say its proto-max-bulk-len (CONFIG refused): set it to 8mb "
            "there, or one machine's push of hundreds of MB reaches the ingest whole"
        )
        + "\n"
        + memory_words(synced.memory)
        + "\nStudents set this before `felab worker pair --code CODE` (it can only pair):\n"
        f"  FELAB_BROKER_URL={url}",
        markup=False,
    )
    if url.startswith("rediss://"):
        console.print("  FELAB_BROKER_CA_FILE=<the file `felab broker ca` prints>", markup=False)


@broker_app.command("ca")
def ca() -> None:
    """Print the CA certificate students need for a rediss:// broker (FELAB_BROKER_CA_FILE)."""
    settings = get_settings()
    path = settings.broker_ca_file
    if path is None:
        err(
            "FELAB_BROKER_CA_FILE is not set: point it at the CA that signed the broker's "
            "certificate (docker-compose makes one on first start)"
        )
        raise typer.Exit(EXIT_USAGE)
    from cryptography.hazmat.primitives.serialization import Encoding

    from felab_worker.tls import read_ca_file

    try:  # re-written from what was parsed: never a key, never whatever else the setting names
        certs = read_ca_file(path)
    except Invalid as exc:
        err(f"{exc}; nothing was printed")
        raise typer.Exit(EXIT_USAGE) from None
    typer.echo("".join(c.public_bytes(Encoding.PEM).decode() for c in certs), nl=False)


@broker_app.command("tls")
def tls(
    folder: Path = typer.Option(
        ...,
        "--dir",
        help="Where to keep the CA and the certificate (created if missing).",
        parser=folder_parser("--dir tls"),
        metavar="DIR",
    ),
    host: list[str] = typer.Option(
        [], "--host", help="A name or IP students reach the broker at (repeat for several)."
    ),
) -> None:
    """Make the broker's TLS files once: a private CA (ca.pem, what students need) and the
    server's certificate (redis.pem, redis.key) for `redis`, `localhost`, 127.0.0.1, the host
    of FELAB_BROKER_PUBLIC_URL and every --host. Files already there are kept; a CA already
    there (ca.key and ca.pem) signs a missing certificate, so students keep their ca.pem."""
    from felab_worker.tls import CERT_FILE, KEY_FILE, TLSFolderError, make_certificates

    settings = get_settings()
    for name in host:
        if not _host_name(name):
            err(
                f"--host {echo_of(name)} is neither a DNS name nor an IP address (such as "
                "broker.lab.org)"
            )
            raise typer.Exit(EXIT_USAGE)
    hosts = ["redis", "localhost", "127.0.0.1", *host]
    if settings.broker_public_url:
        public = urlsplit(settings.broker_public_url).hostname
        if public:
            hosts.insert(0, public)
    try:
        made = make_certificates(folder, hosts)
    except TLSFolderError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    if made.kept_ca:
        console.print(
            f"made a certificate for {', '.join(dict.fromkeys(hosts))} in {folder}, signed by "
            f"the CA already there: students keep their ca.pem"
        )
    elif made.created:
        console.print(
            f"made a CA and a certificate for {', '.join(dict.fromkeys(hosts))} in {folder}"
        )
    else:
        console.print(f"kept the TLS files already in {folder}")
        if made.missing:  # asked for and not done: a script must see it
            err(
                f"their certificate does not name {', '.join(dict.fromkeys(made.missing))}: "
                f"to add it, delete {folder / CERT_FILE} and {folder / KEY_FILE} and run this "
                "again with every host; the CA is kept, so students keep their ca.pem (restart "
                "Redis to load the new certificate)"
            )
            raise typer.Exit(EXIT_USAGE)


_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _host_name(name: str) -> bool:
    """A DNS name (labels of letters, digits and '-') or an IP address: what a certificate names."""
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    labels = name.split(".")
    if labels[-1].isdigit():  # 999.1.1.1: a mistyped address, not a name (no top level is digits)
        return False
    return len(name) <= 253 and all(_LABEL.fullmatch(label) for label in labels)

"""The broker's Redis users: one per paired machine, one for pairing, made by the trusted side.

A machine's user reaches its own queue and keys, may push (and nothing else) to the ingest's
inbox, and may only pop from its control list. The pairing user may push to the pairing inbox
and read answers (each sealed with its own code). Neither may run a script (EVAL, FUNCTION),
list or scan keys, flush, reconfigure, monitor, subscribe to anything, kill clients, or touch
ACLs: Redis refuses all of it.

Users made with ACL SETUSER live in Redis's memory: `ensure_users` recreates them from the
database (password hashes only) after a restart, and is safe to run again at any time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from felab_core.jobs.pairing import MachineCredential
from felab_worker import answers
from felab_worker.names import INGEST_QUEUE, PAIRING_QUEUE, Names, glob_escape

#: Every user starts from nothing: no password, no keys, no channels, no commands, no selectors.
_RESET = ["reset", "resetchannels", "-@all", "+ping", "+hello", "+quit"]


def version_of(client: Any) -> tuple[int, ...]:
    """The Redis server's version, such as (7, 0, 15); a server that names none, or answers
    INFO with a number, a list or nothing (redis-py's INFO reader then fails on it), is not a
    Redis felab can make users on."""
    url = answers.address(client)
    try:
        info = client.info("server")
    except (AttributeError, TypeError, ValueError):  # a number, an array or nil: not text
        raise answers.not_redis(url, "INFO", "not the text Redis sends") from None
    return answers.a_version(info, url)


def _connect_rules(version: tuple[int, ...]) -> list[str]:
    """redis-py names its connection with CLIENT SETINFO; 7.2 checks it against the ACL, and
    7.0 does not know the subcommand (naming it there is an error)."""
    return ["+client|setinfo"] if version >= (7, 2) else []


def machine_rules(
    names: Names, worker_id: int, secret_hash: str, version: tuple[int, ...]
) -> list[str]:
    """What one paired machine may do on the broker."""
    own = glob_escape(names.machine_keys(worker_id))
    inbox = glob_escape(names.key(INGEST_QUEUE))
    control = glob_escape(names.control_key(worker_id))
    queue = glob_escape(names.key(names.jobs_queue(worker_id)))
    return [
        *_RESET,
        "on",
        f"#{secret_hash}",
        *_connect_rules(version),
        # its own job queue (kombu adds priority sub-queues named queue + "\x06\x16" + step);
        # LPUSH puts back a job whose pool child died (Celery's reject_on_worker_lost)
        "+brpop",
        "+lpush",
        f"~{queue}*",
        # the broker's clock, which the slices of a spread run start by (read-only, no key)
        "+time",
        # events to the ingest: push only (no read, no delete)
        f"(+lpush %W~{inbox})",
        # the attempt it claims before running a job
        f"(+get +set +watch +unwatch +multi +exec +discard +del ~{own}claim.*)",
        # acknowledgements and cancels: pop only; only the trusted side pushes
        f"(+brpop +rpop ~{control})",
    ]


def pairing_rules(names: Names, secret_hash: str, version: tuple[int, ...]) -> list[str]:
    """What an unpaired machine may do: push one request, read an answer (sealed), read the
    broker's clock (the request's deadline)."""
    inbox = glob_escape(names.key(PAIRING_QUEUE))
    answers = glob_escape(names.answer_key(""))
    return [
        *_RESET,
        "on",
        f"#{secret_hash}",
        *_connect_rules(version),
        # the broker's clock, which a request's deadline is set on (read-only, no key)
        "+time",
        f"(+lpush %W~{inbox})",
        f"(+get %R~{answers}*)",
    ]


@dataclass(frozen=True)
class MemoryCap:
    """Redis's maxmemory and maxmemory-policy after the sync; `set_now` when felab set them
    (the cap was 0), else they are the operator's, left as they are."""

    bytes: int
    policy: str
    set_now: bool

    @property
    def evicts(self) -> bool:
        """Whether a full Redis drops keys (felab's queued jobs among them) to make room."""
        return self.policy != "noeviction"


@dataclass(frozen=True)
class Synced:
    machines: int
    removed: int
    push_cap: int | None = None  # Redis's proto-max-bulk-len after the sync; None if unread
    memory: MemoryCap | None = None  # Redis's memory cap after the sync; None if unread


#: The least cap on one pushed message: a job or event is kilobytes, a result at most
#: FELAB_RESULT_MAX_BYTES of JSON before kombu's base64 envelope (4/3 of it).
_LEAST_PUSH_CAP = 8 * 1024 * 1024


def push_cap_for(result_max_bytes: int) -> int:
    """The largest message the broker should take: room for the largest result felab takes."""
    return max(_LEAST_PUSH_CAP, 2 * result_max_bytes)


def cap_pushes(client: Any, most: int) -> int | None:
    """Lower Redis's proto-max-bulk-len to `most` when it is higher, so a message too large for
    any result is refused by Redis at the door: a paired machine's 150 MB push was read whole,
    and took the ingest to 1.24 GB before the size check. None when Redis will not say (CONFIG
    is refused on some managed services): the operator sets it there."""
    from redis.exceptions import ConnectionError, TimeoutError

    try:
        said = client.config_get("proto-max-bulk-len").get("proto-max-bulk-len")
        current = int(said)
        if current > most:
            client.config_set("proto-max-bulk-len", most)
            return most
        return current
    except (ConnectionError, TimeoutError):
        raise  # a broker that stopped answering, not one that will not say
    except Exception:  # redis.ResponseError / NoPermissionError, a reply that is not a number
        return None


def cap_memory(client: Any, most: int) -> MemoryCap | None:
    """Cap Redis's memory at `most` bytes, full Redis refusing writes (noeviction) rather than
    dropping felab's keys, when it has no cap (maxmemory 0): one machine's 150 pushes of 7 MB
    took a self-run Redis to 771 MB in 2.6 s, towards the host's memory. A cap the operator set
    is left as it is. None when Redis will not say (CONFIG refused): the operator sets it."""
    from redis.exceptions import ConnectionError, TimeoutError

    try:
        current = int(client.config_get("maxmemory").get("maxmemory"))
        if current == 0:
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", most)
            return MemoryCap(most, "noeviction", set_now=True)
        policy = str(client.config_get("maxmemory-policy").get("maxmemory-policy"))
        return MemoryCap(current, policy, set_now=False)
    except (ConnectionError, TimeoutError):
        raise  # a broker that stopped answering, not one that will not say
    except Exception:  # redis.ResponseError / NoPermissionError, a reply that is not a number
        return None


def ensure_users(
    client: Any,
    names: Names,
    pairing_hash: str,
    machines: list[MachineCredential],
    *,
    push_cap: int = _LEAST_PUSH_CAP,
    memory_cap: int | None = None,
) -> Synced:
    """Make the broker's felab users exactly the database's: create or refresh each, and delete
    users of machines no longer paired; cap the size of a pushed message, and Redis's memory
    when nobody has (`memory_cap` bytes; None: left alone). Idempotent.

    Every answer is checked (answers.py): a server that says +OK to everything had been
    reported as "broker users ready", and students were handed a URL to nothing. The machines'
    users go in one pipeline, so a class of hundreds costs one round trip, not one each."""
    url = answers.address(client)
    version = version_of(client)
    pairing = pairing_rules(names, pairing_hash, version)
    answers.an_ok(
        client.execute_command("ACL", "SETUSER", names.pairing_user, *pairing), url, "ACL SETUSER"
    )
    wanted = set()
    with client.pipeline(transaction=False) as pipe:
        for cred in machines:
            user = names.machine_user(cred.worker_id)
            wanted.add(user)
            rules = machine_rules(names, cred.worker_id, cred.secret_hash, version)
            pipe.execute_command("ACL", "SETUSER", user, *rules)
        for said in pipe.execute() if machines else []:
            answers.an_ok(said, url, "ACL SETUSER")
    stale = [
        u
        # read as sent: redis-py's ACL USERS reader makes "OK" ['O', 'K']
        for u in answers.names(client.execute_command("ACL", "USERS"), url, "ACL USERS")
        if u.startswith(names.machine_user(0)[:-1]) and u not in wanted
    ]
    for user in stale:
        client.acl_deluser(user)
    memory = cap_memory(client, memory_cap) if memory_cap is not None else None
    return Synced(len(wanted), len(stale), cap_pushes(client, push_cap), memory)


def set_machine(client: Any, names: Names, cred: MachineCredential) -> None:
    """Create or refresh one machine's user (right after it paired)."""
    rules = machine_rules(names, cred.worker_id, cred.secret_hash, version_of(client))
    said = client.execute_command("ACL", "SETUSER", names.machine_user(cred.worker_id), *rules)
    answers.an_ok(said, answers.address(client), "ACL SETUSER")


def remove_machine(client: Any, names: Names, worker_id: int) -> None:
    """Delete a machine's user: Redis drops its live connections at once."""
    client.acl_deluser(names.machine_user(worker_id))


def users_present(client: Any, names: Names) -> bool:
    """Whether the broker still has felab's users (a restarted Redis has none)."""
    return client.acl_getuser(names.pairing_user) is not None

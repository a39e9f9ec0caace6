"""The broker's answers, checked before felab believes them, and its failures said in words.

A server at the broker's address that is not Redis (a proxy, a fake, another program's port)
answers in shapes Redis never does: a queue of 10**26 jobs, INFO with no version, +OK to ACL
USERS, an integer where INFO's text should be. Each is refused here as a broker felab cannot
use (exit 3), naming the address, never shown as fact, taken for a working setup, or left to
surface as a Python error (exit 70). Only NOPERM is the user's to fix.
"""

from __future__ import annotations

import re
from typing import Any

from felab_core.errors import Invalid, ServiceError
from felab_core.redact import redact
from felab_core.redact import url_password_masked as redacted
from felab_core.text import with_hidden_shown

#: The most a Redis count can be: its lengths are signed 64-bit integers.
MOST_COUNT = 2**63 - 1
#: felab makes users with ACL selectors, which came with Redis 7.
LEAST_VERSION = (7,)
_VERSION = re.compile(r"\d{1,4}(\.\d{1,6}){0,3}")


class BrokerUnusable(ServiceError):
    """The broker answered, but not as Redis 7 does, or too slowly: nothing to retype, a
    service felab cannot use (exit 3)."""


class BrokerRefused(Invalid):
    """The broker refused felab's user a command (NOPERM): a setting to fix (exit 2)."""


def address(client: Any) -> str:
    """The broker a redis-py client talks to, as a URL without its user (for messages)."""
    kwargs = client.connection_pool.connection_kwargs
    tls = "SSL" in getattr(client.connection_pool, "connection_class", type).__name__
    host = str(kwargs.get("host", "?"))
    host = f"[{host}]" if ":" in host else host
    return (
        f"{'rediss' if tls else 'redis'}://{host}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
    )


def shown(said: object, limit: int = 120) -> str:
    """A server's words for a terminal: secrets masked, control characters as '?' (an escape
    code in an error text had reached stdout), cut at `limit`."""
    text = with_hidden_shown(redact(str(said).strip().replace("\n", " ")))
    return text if len(text) <= limit else text[:limit] + "..."


def not_redis(url: str, command: str, detail: str) -> BrokerUnusable:
    return BrokerUnusable(
        f"the broker at {redacted(url)} answered {command} with something that is not Redis's "
        f"answer ({detail}): is FELAB_BROKER_URL's port Redis's?"
    )


def a_count(said: Any, url: str, command: str) -> int:
    """`said` as a length or count, refused unless Redis could have said it."""
    if isinstance(said, bool) or not isinstance(said, int) or not 0 <= said <= MOST_COUNT:
        raise not_redis(url, command, shown(said, 40))
    return said


def a_version(info: Any, url: str) -> tuple[int, ...]:
    """The version INFO server names, such as (7, 0, 15); a server that names none, or one
    before Redis 7, is refused."""
    version = info.get("redis_version") if isinstance(info, dict) else None
    text = "" if version is None or isinstance(version, bool) else str(version)
    if not _VERSION.fullmatch(text):
        raise BrokerUnusable(
            f"the broker at {redacted(url)} is not Redis 7 or later (INFO names no version"
            f"{'' if version is None else ': ' + shown(version, 40)}): felab needs Redis 7 or "
            "later with ACLs; check what FELAB_BROKER_URL names"
        )
    numbers = tuple(int(p) for p in text.split("."))
    if numbers < LEAST_VERSION:
        raise BrokerUnusable(
            f"the broker at {redacted(url)} is Redis {text}: felab needs Redis 7 or later "
            "(its users are made with ACL selectors); upgrade it"
        )
    return numbers


def an_ok(said: Any, url: str, command: str) -> None:
    """A command Redis answers with +OK (ACL SETUSER), refused when it answered anything else."""
    if said is not True and said != "OK":
        raise not_redis(url, command, shown(said, 40))


def names(said: Any, url: str, command: str) -> list[str]:
    """A list of names (ACL USERS), refused when it is not one."""
    if not isinstance(said, list) or not all(isinstance(x, str) for x in said):
        raise not_redis(url, command, shown(said, 40))
    return said


def failure(exc: BaseException, url: str, command: str, prefix: str) -> ServiceError:
    """The words for a broker that was reached and then failed `command`: NOPERM and WRONGTYPE
    are for the person to fix (exit 2); a timeout, a closed connection or an answer no Redis
    gives is a broker felab cannot use (exit 3)."""
    from redis import exceptions as rx

    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, rx.NoPermissionError):
        return BrokerRefused(
            f"the broker at {redacted(url)} refused {command} ({shown(exc, 120)}): "
            "FELAB_BROKER_URL must name felab's admin user (the pairing URL may only pair)"
        )
    fault = broker_fault(exc, prefix)
    if fault is not None:
        return fault
    if isinstance(exc, rx.TimeoutError):
        return BrokerUnusable(
            f"the broker at {redacted(url)} did not answer {command} in time ({shown(exc, 80)}): "
            "is Redis overloaded, or is FELAB_BROKER_URL's port Redis's?"
        )
    if isinstance(exc, rx.ConnectionError):
        return BrokerUnusable(
            f"the broker at {redacted(url)} dropped the connection on {command} "
            f"({shown(exc, 80)}): is Redis restarting, or is FELAB_BROKER_URL's port Redis's?"
        )
    return not_redis(url, command, shown(exc, 120) or type(exc).__name__)


class BrokerKeyWrongType(Invalid):
    """A queue's key on the broker holds another kind of value: Redis refuses every pop."""


def broker_fault(exc: BaseException, prefix: str) -> BrokerKeyWrongType | None:
    """The words for a broker whose queue key holds a string, hash or set (WRONGTYPE): only
    the trusted side or another program sharing the Redis can write one (machines may only
    push), so the fix is on the broker."""
    if "WRONGTYPE" not in str(exc):
        return None
    return BrokerKeyWrongType(
        f"a queue on the broker holds another kind of value (Redis said WRONGTYPE): another "
        f"program writes keys under FELAB_BROKER_PREFIX ({prefix!r}) on this Redis? Give felab "
        f"its own prefix or Redis database, or delete the wrong keys (redis-cli --scan "
        f"--pattern '{prefix}*' shows them; TYPE tells a queue, a list, from the rest)"
    )

"""A paired machine's broker login, checked before Celery starts.

Celery retries a refused login forever ("Trying again ... (n/None)"): a machine removed by
`felab worker remove`, or an identity whose password no longer matches, would wait for good
without a word. felab logs in first and says so; a broker that is away is still waited for.
Something at the broker's address that answers, but not as Redis does, is said at once (exit
3): Celery's own client had stopped on it with "a bug in felab" (eighteenth sweep).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from felab_core.errors import Forbidden
from felab_core.jobs.keys import PAIR_AGAIN, Identity
from felab_core.settings import Settings
from felab_worker.answers import BrokerUnusable, shown
from felab_worker.broker import broker_url, is_redis, redacted, redis_client

log = logging.getLogger("felab.worker")


class BrokerRefused(Forbidden):
    """The broker refused this machine's own user: Celery would retry it forever."""


def user_of(url: str) -> str:
    try:
        return urlsplit(url).username or "?"
    except ValueError:
        return "?"


def refusal(exc: BaseException) -> bool:
    """Whether `exc` is Redis refusing a login or a command (not a broker that is away), also
    when kombu raised it again as its own error."""
    import redis

    seen: BaseException | None = exc
    for _ in range(8):  # the error, then what it was raised from
        if seen is None:
            return False
        if isinstance(seen, redis.AuthenticationError | redis.exceptions.NoPermissionError):
            return True
        text = str(seen)
        if isinstance(seen, redis.ResponseError) and any(
            word in text for word in ("WRONGPASS", "NOPERM", "invalid username-password pair")
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def login_grace_s(settings: Settings) -> float:
    """How long a refused login is tried again before it is called final: a broker that just
    restarted has lost its users until the ingest reconnects (Celery's back-off, up to tens of
    seconds) and its reconciler makes them again."""
    return min(120.0, 15.0 + 3 * settings.reconcile_every_s)


class NotPong(Exception):
    """PING was answered without an error, but not with PONG."""


def _ping(url: str, settings: Settings, timeout_s: float) -> BaseException | None:
    """PING as this machine: None when Redis answered PONG, else what went wrong."""
    client = redis_client(url, settings, timeout_s=timeout_s)
    try:
        said = client.ping()
    except Exception as exc:
        return exc
    finally:
        client.close()
    return None if said is True else NotPong("PING was answered, but not with PONG")


def _not_redis(url: str, exc: BaseException) -> BrokerUnusable | None:
    """The words for an answer no Redis gives (wrong protocol, too deep, an error where Redis
    says PONG or refuses the user); None for a broker that is away or refuses."""
    import redis

    rx = redis.exceptions
    if refusal(exc) or not isinstance(exc, NotPong | rx.InvalidResponse | rx.ResponseError):
        return None
    return BrokerUnusable(
        f"the broker at {redacted(url)} answered, but not as Redis does ({shown(exc, 120)}): "
        "is that address still felab's Redis (the broker URL this machine was paired with)?"
    )


def unlike_redis(url: str, settings: Settings, timeout_s: float = 5.0) -> BrokerUnusable | None:
    """The words when the broker at `url` now answers as no Redis does; None when it answers
    PONG, refuses, or is away (what else stopped Celery is then not the broker's answer)."""
    if not is_redis(url):
        return None
    exc = _ping(url, settings, timeout_s)
    return None if exc is None else _not_redis(url, exc)


def _refused(url: str, settings: Settings, timeout_s: float) -> bool:
    """Whether the broker refuses this machine's login; False when it lets it in, and when it
    does not answer (that is left to Celery). An answer no Redis gives is raised."""
    exc = _ping(url, settings, timeout_s)
    if exc is None:
        return False
    if refusal(exc):
        return True
    unusable = _not_redis(url, exc)
    if unusable is not None:
        raise unusable
    silent = "reading from" in str(exc).lower()  # it took the connection, then said nothing
    log.warning(
        "the broker did not answer yet (%s); the worker waits for it%s",
        shown(exc, 200),
        "; a port that takes connections but never answers is often a TLS one: is the URL "
        "rediss:// where it should be?"
        if silent and url.startswith("redis://")
        else "",
    )
    return False


def check_login(
    identity: Identity,
    settings: Settings,
    *,
    timeout_s: float = 5.0,
    grace_s: float | None = None,
) -> None:
    """Log in as this machine (AUTH, PING) before Celery starts: a user removed by `felab worker
    remove`, or a password that no longer matches, is retried by Celery forever ("Trying again
    ... (n/None)"). A refusal is tried again for `grace_s` (login_grace_s) in case the broker
    just restarted; a broker that is away is left to Celery, which waits for it: a machine
    started before the broker (a reboot, a restart) must come up on its own."""
    url = identity.broker_url or broker_url(settings)
    if not is_redis(url):
        return
    grace = login_grace_s(settings) if grace_s is None else grace_s
    deadline = time.monotonic() + grace
    user = user_of(url)
    said = False
    while _refused(url, settings, timeout_s):
        if time.monotonic() >= deadline:
            raise BrokerRefused(
                f"the broker at {redacted(url)} refused this machine's user ({user}) for "
                f"{grace:.0f} s: it may have been removed or its password changed; {PAIR_AGAIN}",
                reason="login",
            )
        if not said:
            log.warning(
                "the broker refused this machine's user (%s): trying again for up to %.0f s, in "
                "case it has just restarted (the ingest makes its users again)",
                user,
                grace,
            )
            said = True
        time.sleep(1.0)


@dataclass
class RefusalWatch:
    """A running worker's login, watched: a machine removed by `felab worker remove` while it
    runs (or whose password changed) is refused on every reconnect, and Celery retries that
    forever. The first refusal is said once; one that lasts past a restart's grace is final."""

    url: str
    grace_s: float
    since: float | None = None
    final: BrokerRefused | None = None

    def saw(self, exc: BaseException | None) -> bool:
        """Note one try at the broker (None: it went through); whether it was refused."""
        if exc is None or not refusal(exc):
            self.since = None  # let in, or away (a restart): a later refusal starts afresh
            return False
        now = time.monotonic()
        if self.since is None:
            self.since = now
            log.warning(
                "the broker refused this machine's user (%s): it may have been removed; trying "
                "again for up to %.0f s, in case the broker has just restarted",
                user_of(self.url),
                self.grace_s,
            )
        elif self.final is None and now - self.since >= self.grace_s:
            self.final = BrokerRefused(
                f"the broker at {redacted(self.url)} refused this machine's user "
                f"({user_of(self.url)}) for {self.grace_s:.0f} s while the worker ran: it was "
                f"removed or its password changed, so the worker stopped; {PAIR_AGAIN}",
                reason="login",
            )
        return True

"""The machine's side of pairing: push one request with the pairing URL, wait for the sealed
answer, and keep the machine's identity (its key and its own broker URL) on disk.

The code never leaves the machine: the request carries a lookup id and a proof derived from it
(felab_core.jobs.handshake), and only this code opens the answer.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from felab_core.errors import Forbidden, Invalid, ServiceError
from felab_core.jobs.handshake import answer_id, check_code_shape, make_request, open_sealed
from felab_core.jobs.keys import Identity, check_identity_destination, new_private_key
from felab_core.jobs.run import target_names
from felab_core.settings import Settings
from felab_worker.answers import BrokerUnusable, failure, shown
from felab_worker.app import pairing_app
from felab_worker.broker import (
    CONNECT_TIMEOUT_S,
    broker_url,
    is_redis,
    make_store,
    redacted,
    redis_client,
    send_task,
    with_credentials,
)
from felab_worker.names import PAIRING_QUEUE, Names


class PairingError(ServiceError):
    """Pairing did not complete; the message says what to check."""


class BrokerRefusedUser(PairingError):
    """The broker was reached and refused the URL's user or password (exit code 2: a setting
    to fix, not a Redis to start)."""


def refused_user(url: str) -> str:
    """Why the broker refused the URL's login: with no password in the URL (`redis://alice@h`),
    "a wrong password" sent the reader to a password they never gave; with neither user nor
    password it named user 'default', which the URL never did. A bare user is not
    repeated: it is often the password typed without its `:` (masked in the URL too). The
    advice shows no URL: a `redis://USER:PASSWORD@` in it would be masked on the way out."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:  # redis://host:port/0: Redis's default user
        return (
            f"the broker at {redacted(url)} refused a login with no user and no password (it "
            "needs them, or its default user is off): write them before the host, as "
            "USER:PASSWORD@ in the broker URL (a password alone as :PASSWORD@)"
        )
    if parts.username and not parts.password:
        return (
            f"the broker at {redacted(url)} refused the user (no password was given): write "
            "its password after the user and a colon (USER:PASSWORD before the @ in the broker "
            "URL); a password alone goes after a colon with no user (:PASSWORD before the @)"
        )
    user = parts.username or "default"
    return (
        f"the broker at {redacted(url)} refused user {user!r} (a wrong password, or the "
        "user is off): check the user and password in the broker URL"
    )


class BrokerUnreachable(PairingError):
    """The broker could not be reached at all (exit code 3, not 2: nothing to retype)."""


class BrokerNotRedis(BrokerUnreachable):
    """Something answered at the broker's address, but not as Redis does (exit code 3)."""


_STUDENT_ADVICE = (
    "check FELAB_BROKER_URL (the pairing URL your instructor gave), that the broker is up, and "
    "FELAB_BROKER_CA_FILE for rediss://"
)


def check_reachable(
    url: str, settings: Settings, timeout_s: float, advice: str = _STUDENT_ADVICE
) -> None:
    """Fail within `timeout_s` when the broker is unreachable, accepts and never answers, or
    answers a byte at a time (`timeout_s` is the whole check's, not each read's: one PONG
    dribbled over 12 s had passed a 3 s check), before Celery's own retries start."""
    if not is_redis(url):
        return
    import redis

    client = redis_client(
        url,
        settings,
        timeout_s=max(0.5, min(timeout_s, CONNECT_TIMEOUT_S)),
        within_s=max(0.5, timeout_s),
    )
    try:
        pong = client.ping()
    except redis.exceptions.NoPermissionError as exc:
        wrong_db = _database_refused(url, exc)
        if wrong_db is not None:
            raise wrong_db from None
        return  # Redis answered: a pairing user may not be allowed PING
    except redis.exceptions.AuthenticationError:  # reached: it refused the user (b B7)
        raise BrokerRefusedUser(refused_user(url)) from None
    except redis.exceptions.ResponseError as exc:
        if "DB index" in str(exc):  # SELECT on connecting: the URL's /N is past the last one
            raise PairingError(
                f"the broker at {redacted(url)} has no such database ({exc}): the number after "
                "the last / in FELAB_BROKER_URL must be one it has (0-15 unless configured)"
            ) from None
        # Redis answers PING with PONG, or NOPERM for a user not allowed it: anything else is
        # something that speaks the protocol but is not a Redis felab can use.
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise BrokerNotRedis(
            f"the broker at {redacted(url)} answered PING with an error ({detail!r}): not a "
            f"Redis felab can use; {advice}"
        ) from None
    except redis.exceptions.RedisError as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if isinstance(exc, redis.exceptions.InvalidResponse):  # answered, but not in Redis's
            shown = re.sub(r"b(['\"])(.*?)\1", r"\2", detail)[:160]  # protocol, too large
            raise BrokerNotRedis(  # or nested too deep
                f"the broker address {redacted(url)} answered, but not as Redis does "
                f"({shown.encode('ascii', 'backslashreplace').decode()}): is FELAB_BROKER_URL's "
                f"port Redis's? {advice}"
            ) from None
        if url.startswith("rediss://") and "timeout" in detail.lower():
            advice = (
                "a rediss:// URL that times out is often a plain Redis: is this port TLS "
                f"(rediss://) or plain (redis://)? {advice}"
            )
        raise BrokerUnreachable(
            f"could not reach the broker at {redacted(url)} ({detail}): {advice}"
        ) from None
    finally:
        client.close()
    if pong is not True:  # answered without an error, but not PONG (+OK to everything)
        raise BrokerNotRedis(
            f"the broker address {redacted(url)} answered, but not as Redis does (PING was not "
            f"answered PONG): is FELAB_BROKER_URL's port Redis's? {advice}"
        )


def _database_refused(url: str, exc: BaseException) -> PairingError | None:
    """The words for Redis refusing the URL's database (SELECT on connecting, NOPERM): felab's
    pairing and machine users may use database 0 only (sweep 23 M1: it was blamed on the
    port); None for any other refusal."""
    if "'select' command" not in str(exc):
        return None
    parts = urlsplit(url)
    db = parts.path.strip("/") or "0"
    return PairingError(
        f"the broker at {redacted(url)} refused database {db[:20]} to user "
        f"{parts.username or 'default'!r} (felab's pairing and machine users may use database 0 "
        "only): use the pairing URL exactly as your instructor gave it (it ends in /0)"
    )


_MACHINE_USER = re.compile(r"-machine\.[0-9]+\Z")


def _prefix_refused(url: str, settings: Settings, exc: BaseException | None = None) -> PairingError:
    """The words for Redis refusing the pairing inbox or answer: the URL's database, its user
    (a paired machine's own URL, sweep 23 M2, had been blamed on FELAB_BROKER_PREFIX), or the
    prefix."""
    wrong_db = None if exc is None else _database_refused(url, exc)
    if wrong_db is not None:
        return wrong_db
    user = urlsplit(url).username or "default"
    pairing_user = Names(settings.broker_prefix).pairing_user
    if _MACHINE_USER.search(user):
        return PairingError(
            f"the broker URL {redacted(url)} names {user}, a paired machine's own user (from "
            f"`felab worker identity`): pairing needs the pairing URL (user {pairing_user}) "
            "your instructor gave, in FELAB_BROKER_URL"
        )
    if user != pairing_user and not user.endswith("-pairing"):
        return PairingError(
            f"the broker URL {redacted(url)} names user {user[:60]!r}, not felab's pairing "
            f"user ({pairing_user}): use the pairing URL your instructor gave, in "
            "FELAB_BROKER_URL"
        )
    return PairingError(
        f"the broker at {redacted(url)} refused the pairing user the inbox "
        f"{settings.broker_prefix}{PAIRING_QUEUE}: FELAB_BROKER_PREFIX must be the "
        "server's (unset it for felab:, or ask your instructor which it is)"
    )


def _publish(
    url: str, settings: Settings, request: dict[str, Any], deadline: float, timeout_s: float
) -> None:
    """Push the pairing request by Celery, within what is left of `timeout_s`: kombu gives each
    read of a retried publish its whole timeout, so a broker answering LPUSH a byte at a time
    or with `$-5` had held `--timeout 10` for 37-61 s. A publish still going at the deadline is
    left to end with the process (a daemon thread)."""
    outcome: list[BaseException | None] = []

    def publish() -> None:
        try:
            send_task(
                pairing_app(settings),
                "felab.pair",
                args=[request],
                queue=PAIRING_QUEUE,
                retry=True,
                retry_policy={
                    "max_retries": max(0, int(timeout_s // 2)),
                    "interval_start": 0,
                    "interval_step": 1,
                    "interval_max": 2,
                },
            )
            outcome.append(None)
        except Exception as exc:
            outcome.append(exc)

    worker = threading.Thread(target=publish, name="felab-pair-publish", daemon=True)
    worker.start()
    worker.join(max(0.5, deadline - time.monotonic()))
    if not outcome:
        raise BrokerUnreachable(
            f"the broker at {redacted(url)} did not take the pairing request within "
            f"{timeout_s:g} s: is it Redis, and is it overloaded? check FELAB_BROKER_URL (the "
            "pairing URL your instructor gave)"
        )
    exc = outcome[0]
    if exc is None:
        return
    said = str(exc)
    if "no permissions to access one of the keys" in said or "'select' command" in said:
        raise _prefix_refused(url, settings, exc) from None  # reached, and refused
    if not _unreachable(exc):  # it answered, with what kombu could not read
        raise BrokerNotRedis(
            f"the broker address {redacted(url)} answered the pairing request, but not as Redis "
            "does: is FELAB_BROKER_URL's port Redis's? (the pairing URL your instructor gave)"
        ) from exc
    raise BrokerUnreachable(
        f"could not reach the broker at {redacted(url)} ({type(exc).__name__}: "
        f"{shown(exc, 200)}): check FELAB_BROKER_URL (the pairing URL your instructor gave) "
        "and FELAB_BROKER_CA_FILE"
    ) from None


def _unreachable(exc: BaseException) -> bool:
    """Whether a failed publish is a broker away (no connection, a timeout), not one that
    answered with what no Redis says (an AttributeError or RecursionError of kombu's had been
    shown as "could not reach", eighteenth sweep M5)."""
    from kombu.exceptions import OperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeout

    seen: BaseException | None = exc
    for _ in range(8):  # kombu's OperationalError wraps what redis-py raised
        if seen is None or isinstance(seen, OSError | RedisConnectionError | RedisTimeout):
            return True
        if not isinstance(seen, OperationalError):
            return False
        seen = seen.__cause__ or seen.__context__
    return True


#: What a request's deadline leaves the ingest to write its answer in before the machine stops
#: reading (at most this, or a third of the wait).
_ANSWER_ROOM_S = 5.0


def _until(store: Any, url: str, deadline: float, timeout_s: float) -> float | None:
    """When the ingest must no longer redeem this request, on the broker's clock (a student's
    clock may be minutes off the server's): before this machine stops reading, by room for the
    answer. None when the broker will not tell its time (a pairing user made by an older
    felab): the request then waits for no deadline, as it used to."""
    try:
        now = store.clock() if is_redis(url) else None
    except Exception:  # refused (NOPERM), away or not Redis's answer: the publish says which
        return None
    left = deadline - time.monotonic()
    return (time.time() if now is None else now) + left - min(_ANSWER_ROOM_S, timeout_s / 3)


def _no_answer(timeout_s: float, until: float | None) -> str:
    """The words for a wait that ended without an answer: whether the code is still good."""
    if until is not None:
        return (
            f"no answer from the ingest within {timeout_s:g} s; the code was not used and stays "
            "good until it expires: check that `felab worker ingest` is running on the same "
            "broker (FELAB_BROKER_URL, FELAB_BROKER_PREFIX), then pair again with the same code"
        )
    return (
        f"no answer from the ingest within {timeout_s:g} s: is `felab worker ingest` running "
        "on the same broker (FELAB_BROKER_URL, FELAB_BROKER_PREFIX)? This broker's pairing "
        "user cannot read its clock (made by an older felab: `felab broker setup` on the server "
        "updates it), so the request waits there and may use the code when the ingest starts; "
        "if the next try says the code is used, ask the bot for a new one"
    )


def pair_machine(settings: Settings, code: str, *, timeout_s: float = 30.0) -> Identity:
    """Redeem `code` for this machine; the identity returned is not saved yet."""
    check_code_shape(code)
    check_identity_destination(settings.worker_key_file, settings.data_dir)
    url = broker_url(settings)
    key = new_private_key()
    from redis.exceptions import NoPermissionError, RedisError
    from redis.exceptions import TimeoutError as RedisTimeout

    deadline = time.monotonic() + timeout_s
    check_reachable(url, settings, timeout_s)
    store = make_store(url, settings, within_s=max(0.5, deadline - time.monotonic()))
    until = _until(store, url, deadline, timeout_s)
    request = make_request(code, key, target_names(settings.targets_file), until)
    _publish(url, settings, request, deadline, timeout_s)
    answer_key = Names(settings.broker_prefix).answer_key(answer_id(request))
    raw = None
    try:
        while time.monotonic() < deadline:
            raw = store.get(answer_key)
            if raw is not None:
                break
            time.sleep(0.2)
    except (RedisError, ServiceError) as exc:  # a timeout: the budget spent, no answer
        if isinstance(exc, NoPermissionError):
            raise _prefix_refused(url, settings, exc) from None
        if not isinstance(exc, RedisTimeout):
            raise failure(exc, url, "GET", settings.broker_prefix) from None
    if raw is None:
        raise BrokerUnreachable(_no_answer(timeout_s, until))  # exit 3, nothing to retype
    try:
        box = json.loads(raw)
    except ValueError:
        box = None
    if not isinstance(box, dict):  # only the trusted side writes answers: pairing again
        raise BrokerUnusable(  # cannot help (seventeenth sweep L6)
            f"the answer on the broker at {redacted(url)} is not one felab's ingest writes (a "
            "JSON object): is FELAB_BROKER_URL's port Redis's, with `felab worker ingest` on it?"
        )
    if "error" in box:
        raise Forbidden(str(box["error"]))
    answer = open_sealed(code, str(box.get("sealed") or ""))
    try:
        worker_id, name = int(answer["worker_id"]), str(answer["name"])
    except (KeyError, TypeError, ValueError):
        raise Invalid("the pairing answer lacks the worker's id: pair again") from None
    own_url = None
    if is_redis(url):
        user, password = answer.get("broker_user"), answer.get("broker_password")
        if not isinstance(user, str) or not isinstance(password, str):
            raise Invalid("the pairing answer lacks this machine's broker user: pair again")
        own_url = with_credentials(url, user, password)
    return Identity(worker_id, name, key, own_url)

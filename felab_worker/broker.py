"""Connections to the broker: its URL (or the embedded SQLite file), TLS, timeouts, and a small
store over it for what is not a Celery message: attempt claims, control lists, pairing answers.

Every connection has connect and read timeouts, so a laptop that slept or a broker that went
away makes a call fail (and retry) instead of hanging.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import ssl
import time
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

from felab_core.redact import url_password_masked
from felab_core.settings import Settings

Claim = Literal["run", "again", "stale"]

#: Seconds to open a connection, and to wait for any answer but a blocking pop's.
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 15.0


def broker_url(settings: Settings) -> str:
    """FELAB_BROKER_URL, or kombu's SQLAlchemy transport on a SQLite file (no server needed)."""
    if settings.broker_url:
        return settings.broker_url
    return f"sqla+sqlite:///{(settings.data_dir / 'broker.db').resolve()}"


def is_redis(url: str) -> bool:
    return url.startswith(("redis://", "rediss://"))


def redacted(url: str) -> str:
    """`url` with its password replaced by `***`, for logs and messages."""
    return url_password_masked(url)


def with_credentials(url: str, user: str, password: str) -> str:
    """`url` (scheme, host, port, database) with another user and password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}{port}"
    return urlunsplit(parts._replace(netloc=netloc, query="", fragment=""))


# redis-py warns in its own words (RESP3, "Module commands (JSON, Search ...)") when a server
# lacks HELLO and it falls back to RESP2: felab says what it needs of the broker itself
# (`check_reachable`, `broker setup`), and the fallback works for every command felab sends.
logging.getLogger("redis.connection").setLevel(logging.ERROR)


def ca_file(settings: Settings) -> str | None:
    """FELAB_BROKER_CA_FILE, checked before TLS reads it: a key, a folder or a missing file
    read as "could not reach the broker", the one cause it is not."""
    path = settings.broker_ca_file
    if path is None:
        return None
    from felab_worker.tls import read_ca_file

    read_ca_file(path)
    return str(path)


def ssl_options(url: str, settings: Settings) -> dict[str, Any] | None:
    """TLS for rediss:// URLs, as Celery wants it: the server's certificate is always checked."""
    if not url.startswith("rediss://"):
        return None
    opts: dict[str, Any] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    ca = ca_file(settings)
    if ca is not None:
        opts["ssl_ca_certs"] = ca
    return opts


#: The most one reply from the broker may hold. felab's own keys and lists hold kilobytes; a
#: server at the broker's address that answered PING with a billion-byte string took a
#: student's `felab worker pair` to 2.9 GB before "Bad response".
MAX_REPLY_BYTES = 16 * 1024 * 1024
#: The deepest a reply's arrays may nest: felab's answers nest two deep (BRPOP, TIME's pair).
#: 200,000 nested `*1` stopped `felab broker setup` on Python's recursion limit (exit 70).
MAX_REPLY_NESTING = 32


@functools.cache  # one parser class for every client, made on first use
def _bounded_parser() -> type:
    """redis-py's reply parser with every reply held to MAX_REPLY_BYTES and MAX_REPLY_NESTING,
    and to the read timeout as a whole: a bulk that claims more is refused before it is read,
    a line that never ends stops there, and a server that sends one byte every 2 s (each read
    well within the timeout) is cut off when the timeout has passed since the reply began,
    not 15 s after its last byte. (It extends redis-py's own parser and socket buffer, internal
    classes: tests/worker/test_broker_replies.py fails if they change.)"""
    from redis._parsers.resp2 import _RESP2Parser
    from redis._parsers.socket import SENTINEL, SocketBuffer  # type: ignore[attr-defined]
    from redis.exceptions import InvalidResponse, TimeoutError

    too_big = InvalidResponse(
        f"the server answered with over {MAX_REPLY_BYTES // 2**20} MiB at once: no Redis "
        "answer to felab is that large"
    )
    too_deep = InvalidResponse(
        f"the server answered with arrays nested over {MAX_REPLY_NESTING} deep: no Redis "
        "answer to felab is"
    )

    class BoundedBuffer(SocketBuffer):
        #: When the reply being read must be whole (time.monotonic()); None between replies.
        reply_by: float | None = None

        def _read_from_socket(
            self, length: int | None = None, timeout: Any = SENTINEL, raise_on_timeout: Any = True
        ) -> bool:
            if length is not None and length > MAX_REPLY_BYTES:
                raise too_big
            if self.reply_by is None:
                return self._checked(super()._read_from_socket(length, timeout, raise_on_timeout))
            # one receive at a time, each within what is left of the reply's time: redis-py's
            # own loop gives every receive of a bulk the whole timeout again
            start = self._held()
            while True:
                left = self.reply_by - time.monotonic()
                if left <= 0:
                    raise TimeoutError("Timeout reading from socket (the answer came too slowly)")
                wait = left if timeout is SENTINEL or timeout is None or timeout > left else timeout
                if not self._checked(super()._read_from_socket(None, wait, raise_on_timeout)):
                    return False
                if length is None or self._held() - start >= length:
                    return True

        def _held(self) -> int:
            """Bytes in the buffer: this reply's since the last purge (redis-py purges after
            each), read and unread."""
            return self._live_buffer().getbuffer().nbytes

        def _checked(self, got: Any) -> bool:
            if self._held() > MAX_REPLY_BYTES:  # a line that never ends, or a bulk
                raise too_big
            return bool(got)

    class BoundedParser(_RESP2Parser):
        #: The client's whole budget (time.monotonic()), set by `redis_client(within_s=...)`.
        deadline: float | None = None
        _nesting = 0

        def on_connect(self, connection: Any) -> None:
            super().on_connect(connection)  # type: ignore[no-untyped-call]
            self._buffer.__class__ = BoundedBuffer

        def read_response(self, disable_decoding: bool = False, timeout: Any = SENTINEL) -> Any:
            buffer = self._buffer
            if isinstance(buffer, BoundedBuffer):
                by = [self.deadline] if self.deadline is not None else []
                if buffer.socket_timeout is not None:
                    by.append(time.monotonic() + buffer.socket_timeout)
                buffer.reply_by = min(by, default=None)
            try:
                return super().read_response(disable_decoding=disable_decoding, timeout=timeout)
            finally:
                if isinstance(buffer, BoundedBuffer):
                    buffer.reply_by = None

        def _read_response(self, disable_decoding: bool = False, timeout: Any = SENTINEL) -> Any:
            self._nesting += 1
            try:
                if self._nesting > MAX_REPLY_NESTING:
                    raise too_deep
                return super()._read_response(disable_decoding=disable_decoding, timeout=timeout)
            finally:
                self._nesting -= 1

    return BoundedParser


def redis_client(
    url: str, settings: Settings, *, timeout_s: float | None = None, within_s: float | None = None
) -> Any:
    """A redis-py client for `url` with felab's timeouts and TLS checks (strings in and out);
    `timeout_s` shortens both the connect and the read timeout (a quick reachability check).
    `within_s` is a one-shot command's whole budget: every answer this client reads must be in
    by then, and nothing is tried again."""
    import redis
    from redis.backoff import NoBackoff
    from redis.maint_notifications import MaintNotificationsConfig
    from redis.retry import Retry

    parser = _bounded_parser()
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": min(CONNECT_TIMEOUT_S, timeout_s or CONNECT_TIMEOUT_S),
        "socket_timeout": min(READ_TIMEOUT_S, timeout_s or READ_TIMEOUT_S),
        "health_check_interval": 30,
        "decode_responses": True,
        "parser_class": parser,
        "protocol": 2,  # RESP2 throughout: redis-py's RESP3 handshake reads with its own parser
        # a cloud Redis's maintenance notices need RESP3; redis-py refuses them with our parser
        "maint_notifications_config": MaintNotificationsConfig(enabled=False),
    }
    if within_s is not None:
        deadline = time.monotonic() + within_s
        kwargs["parser_class"] = type(parser.__name__, (parser,), {"deadline": deadline})
        kwargs["retry"] = Retry(NoBackoff(), 0)
    if url.startswith("rediss://"):
        kwargs["ssl_cert_reqs"] = "required"
        ca = ca_file(settings)
        if ca is not None:
            kwargs["ssl_ca_certs"] = ca
    return redis.Redis.from_url(url, **kwargs)


class Store(Protocol):
    """Keys and lists beside the queues. Keys are full names (felab_worker.names.Names)."""

    def set(self, key: str, value: str, ttl_s: int) -> None: ...

    def get(self, key: str) -> str | None: ...

    def delete(self, key: str) -> None: ...

    def claim(self, key: str, attempt: str) -> Claim: ...

    def push(self, key: str, value: str, ttl_s: int | None = None) -> None: ...

    def pop(self, key: str, timeout_s: float) -> str | None: ...

    def clock(self) -> float | None:
        """The broker's clock in seconds (Redis's TIME); None when it is this machine's."""
        ...


class RedisStore:
    """The store on Redis: plain commands a machine's ACL allows, never a Lua script."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def set(self, key: str, value: str, ttl_s: int) -> None:
        self.client.set(key, value, ex=ttl_s)

    def clock(self) -> float | None:
        seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1e6

    def get(self, key: str) -> str | None:
        value = self.client.get(key)
        if value is None or isinstance(value, str):
            return value
        from felab_worker import answers  # Redis answers GET with a string or nil, never more

        raise answers.not_redis(answers.address(self.client), "GET", answers.shown(value, 40))

    def delete(self, key: str) -> None:
        self.client.delete(key)

    def claim(self, key: str, attempt: str) -> Claim:
        """Take `attempt` atomically (WATCH/MULTI): run it once, say `again` on a redelivery."""
        import redis

        with self.client.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)
                    value = pipe.get(key)
                    if value == attempt:
                        pipe.multi()
                        pipe.set(key, f"claimed:{attempt}", keepttl=True)
                        pipe.execute()
                        return "run"
                    pipe.unwatch()
                    return "again" if value == f"claimed:{attempt}" else "stale"
                except redis.WatchError:
                    continue

    def push(self, key: str, value: str, ttl_s: int | None = None) -> None:
        if ttl_s is None:
            self.client.lpush(key, value)
            return
        with self.client.pipeline() as pipe:
            pipe.lpush(key, value)
            pipe.expire(key, ttl_s)
            pipe.execute()

    def pop(self, key: str, timeout_s: float) -> str | None:
        found = self.client.brpop([key], timeout=max(1, round(timeout_s)))
        return None if found is None else str(found[1])


class SqliteStore:
    """The same store in a SQLite file beside the embedded broker (one machine, no server)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT, expires REAL)")
            db.execute("CREATE TABLE IF NOT EXISTS lists (id INTEGER PRIMARY KEY, k TEXT, v TEXT)")

    def clock(self) -> float | None:
        return None  # the embedded broker is a file on this machine: its clock is this one

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10, isolation_level="IMMEDIATE")

    def set(self, key: str, value: str, ttl_s: int) -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", (key, value, time.time() + ttl_s)
            )

    def get(self, key: str) -> str | None:
        with self._db() as db:
            row = db.execute(
                "SELECT v FROM kv WHERE k = ? AND expires > ?", (key, time.time())
            ).fetchone()
        return None if row is None else str(row[0])

    def delete(self, key: str) -> None:
        with self._db() as db:
            db.execute("DELETE FROM kv WHERE k = ?", (key,))

    def claim(self, key: str, attempt: str) -> Claim:
        with self._db() as db:
            row = db.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
            value = row[0] if row else None
            if value == attempt:
                db.execute("UPDATE kv SET v = ? WHERE k = ?", (f"claimed:{attempt}", key))
                return "run"
            return "again" if value == f"claimed:{attempt}" else "stale"

    def push(self, key: str, value: str, ttl_s: int | None = None) -> None:
        with self._db() as db:
            db.execute("INSERT INTO lists (k, v) VALUES (?, ?)", (key, value))

    def pop(self, key: str, timeout_s: float) -> str | None:
        end = time.monotonic() + timeout_s
        while True:
            with self._db() as db:
                row = db.execute(
                    "SELECT id, v FROM lists WHERE k = ? ORDER BY id LIMIT 1", (key,)
                ).fetchone()
                if row is not None:
                    db.execute("DELETE FROM lists WHERE id = ?", (row[0],))
                    return str(row[1])
            if time.monotonic() >= end:
                return None
            time.sleep(0.1)


def send_task(app: Any, name: str, **options: Any) -> None:
    """`app.send_task`, tried again (twice at most) when the embedded broker loses kombu's race
    to create a queue: its SQLAlchemy transport reads the queue table, then inserts, so two
    processes declaring one new queue at the same instant make one fail on the table's unique
    name (seen once in a loaded full run). The queue exists by then: a second try finds it."""
    for attempt in range(3):
        try:
            app.send_task(name, **options)
            return
        except Exception as exc:
            if type(exc).__name__ != "IntegrityError" or attempt == 2:
                raise


def make_store(url: str, settings: Settings, *, within_s: float | None = None) -> Store:
    """The store for `url`: Redis itself (every answer within `within_s`, when given, as
    `redis_client`), or a SQLite file beside the embedded broker's."""
    if is_redis(url):
        return RedisStore(redis_client(url, settings, within_s=within_s))
    if url.startswith("sqla+sqlite:///"):
        return SqliteStore(Path(url.removeprefix("sqla+sqlite:///")).with_name("broker-store.db"))
    raise ValueError(
        f"felab cannot use the broker {redacted(url)}: use redis://, rediss:// or none"
    )

"""Which delivery of a job may run: the dispatcher writes the job's current attempt beside the
message, and a worker claims it atomically before running.

A claim answers `run` (this attempt, first delivery), `again` (this attempt was claimed before:
the process that ran it died and the broker handed the message back) or `stale` (another
attempt is current, or none: a late redelivery, dropped). Redis keeps these keys with the
messages, so a restart loses both together; the reconciler then sends the job again. With the
embedded broker (one machine) a SQLite file beside it does the same.
"""

from __future__ import annotations

import sqlite3
from typing import Literal, Protocol

from felab_core.settings import Settings
from felab_worker.app import broker_url, is_redis, ssl_options

Claim = Literal["run", "again", "stale"]

_CLAIM = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('SET', KEYS[1], 'claimed:' .. ARGV[1], 'KEEPTTL')
  return 'run'
elseif v == 'claimed:' .. ARGV[1] then
  return 'again'
end
return 'stale'
"""


class Claims(Protocol):
    def offer(self, job_id: int, attempt: str, ttl_s: int) -> None: ...

    def claim(self, job_id: int, attempt: str) -> Claim: ...

    def withdraw(self, job_id: int) -> None: ...


class RedisClaims:
    def __init__(self, settings: Settings) -> None:
        import redis

        kwargs = {}
        tls = ssl_options(settings)
        if tls:
            kwargs = {"ssl_cert_reqs": "required", "ssl_ca_certs": tls.get("ssl_ca_certs")}
        self._r = redis.Redis.from_url(broker_url(settings), **kwargs)
        self._prefix = settings.broker_prefix

    def _key(self, job_id: int) -> str:
        return f"{self._prefix}attempt:{job_id}"

    def offer(self, job_id: int, attempt: str, ttl_s: int) -> None:
        self._r.set(self._key(job_id), attempt, ex=ttl_s)

    def withdraw(self, job_id: int) -> None:
        self._r.delete(self._key(job_id))

    def claim(self, job_id: int, attempt: str) -> Claim:
        out = self._r.eval(_CLAIM, 1, self._key(job_id), attempt)
        text = out.decode() if isinstance(out, bytes) else str(out)
        return "run" if text == "run" else "again" if text == "again" else "stale"


class SqliteClaims:
    def __init__(self, settings: Settings) -> None:
        self._path = (settings.data_dir / "claims.db").resolve()
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS claims (job INTEGER PRIMARY KEY, v TEXT)")

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, timeout=10, isolation_level="IMMEDIATE")

    def offer(self, job_id: int, attempt: str, ttl_s: int) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?)", (job_id, attempt))

    def withdraw(self, job_id: int) -> None:
        with self._db() as db:
            db.execute("DELETE FROM claims WHERE job = ?", (job_id,))

    def claim(self, job_id: int, attempt: str) -> Claim:
        with self._db() as db:
            row = db.execute("SELECT v FROM claims WHERE job = ?", (job_id,)).fetchone()
            v = row[0] if row else None
            if v == attempt:
                db.execute("UPDATE claims SET v = ? WHERE job = ?", (f"claimed:{attempt}", job_id))
                return "run"
            return "again" if v == f"claimed:{attempt}" else "stale"


def make_claims(settings: Settings) -> Claims:
    return RedisClaims(settings) if is_redis(broker_url(settings)) else SqliteClaims(settings)

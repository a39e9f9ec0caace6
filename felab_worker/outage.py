"""A broker that goes away while the ingest or a machine's worker runs, said in one line when
it goes and one when it is back.

Celery says a lost broker many times over: its consumer a line per reconnect try, its beat
(the ingest's reconciler) an ERROR with ~210 lines of chained redis/kombu/celery tracebacks for
every beat it cannot send (sweep 23 H1), and a 7-line notice about Celery 6 at each loss. Both
felab processes wait for the broker and go on by themselves, so none of that is news to the
operator or the student: `BrokerOutage` keeps those records from the terminal (with --debug or
FELAB_DEBUG=1 they still show, tracebacks included) and says the outage itself, once. It is
installed by `felab_worker.fatal.kept_fatal`, around Celery, as the filter that keeps Celery's
fatal error is.
"""

from __future__ import annotations

import logging
import threading
import time

from felab_worker.answers import shown
from felab_worker.broker import redacted
from felab_worker.login import refusal

log = logging.getLogger("felab.broker")

#: Celery's loggers whose words about a lost broker are replaced (a filter on a logger sees
#: only the records logged on it).
CONSUMER = "celery.worker.consumer.consumer"
CONNECTION = "celery.worker.consumer.connection"
BEAT = "celery.beat"
REQUEST = "celery.worker.request"  # "Couldn't ack": the message comes again, as it should
WARNINGS = "py.warnings"
LOGGERS = (CONSUMER, CONNECTION, BEAT, REQUEST, WARNINGS)

#: Celery warns at every broker loss that Celery 6 will cancel running late-acked tasks: felab
#: keeps its own setting (a job goes on), and the notice is Celery's, not the operator's.
_CELERY6 = "worker_cancel_long_running_tasks_on_connection_loss"


def away_reason(exc: BaseException | None) -> str | None:
    """What a broker that is away said (a refused connection, a timeout, a closed socket),
    found down the chain Celery and kombu wrap it in; None when `exc` is anything else (a
    refusal of the user, an answer no Redis gives: those are said elsewhere)."""
    from redis.exceptions import AuthenticationError, NoPermissionError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeout

    seen, found = exc, None
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, AuthenticationError | NoPermissionError):
            return None
        if isinstance(seen, OSError | RedisConnectionError | RedisTimeout) and found is None:
            found = seen
        seen = seen.__cause__ or seen.__context__
    return None if found is None else shown(found, 200).rstrip(".") or type(found).__name__


class BrokerOutage(logging.Filter):
    """One line when the broker goes away, one when it is back; Celery's own lines about it
    only under `debug`."""

    def __init__(
        self, url: str, who: str, *, debug: bool = False, refusals_said: bool = False
    ) -> None:
        super().__init__()
        self.url, self.who, self.debug = redacted(url), who, debug
        self.refusals_said = refusals_said
        self._lock = threading.Lock()
        self._since: float | None = None

    @property
    def down(self) -> bool:
        return self._since is not None

    def away(self, reason: str) -> None:
        """The broker cannot be reached: said if it was not already."""
        with self._lock:
            if self._since is not None:
                return
            self._since = time.monotonic()
        log.warning(
            "broker at %s unreachable: %s; retrying, the %s goes on when it is back",
            self.url,
            reason,
            self.who,
        )

    def back(self) -> None:
        """The broker answered again: said if it had been said away."""
        with self._lock:
            if self._since is None:
                return
            gone_s, self._since = time.monotonic() - self._since, None
        log.warning(
            "broker at %s is back (away %.0f s): the %s goes on", self.url, gone_s, self.who
        )

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == CONNECTION:
            if str(record.msg).startswith("Connected to"):
                self.back()
            # this logger is set to INFO to see the reconnect: its lines show as before
            return record.levelno >= logging.getLogger().getEffectiveLevel()
        if record.name == WARNINGS:
            return self.debug or _CELERY6 not in record.getMessage()
        if record.name not in (BEAT, CONSUMER, REQUEST):
            return True
        exc = _exception_of(record)
        reason = away_reason(exc)
        if reason is None:
            # A refused login: a machine's worker says it once, and when it is final (its
            # RefusalWatch); Celery said it again at every try.
            if self.refusals_said and record.name == CONSUMER and exc is not None:
                return self.debug or not refusal(exc)
            return True
        if record.name == CONSUMER:
            self.away(reason)
        # Celery runs the beat in a process of its own: what it says ("Message Error" with a
        # page of tracebacks, "beat: Connection error") is said by the consumer, which notices
        # the same broker gone and sees it come back.
        return self.debug


def _exception_of(record: logging.LogRecord) -> BaseException | None:
    """The error a record is about: its traceback's, or the first one among its arguments."""
    if record.exc_info and record.exc_info[1] is not None:
        return record.exc_info[1]
    args = record.args if isinstance(record.args, tuple) else ()
    return next((a for a in args if isinstance(a, BaseException)), None)


def install(outage: BrokerOutage) -> None:
    for name in LOGGERS:
        logging.getLogger(name).addFilter(outage)
    connection = logging.getLogger(CONNECTION)
    if connection.getEffectiveLevel() > logging.INFO:
        connection.setLevel(logging.INFO)  # "Connected to": the broker is back


def remove(outage: BrokerOutage) -> None:
    for name in LOGGERS:
        logging.getLogger(name).removeFilter(outage)

"""The error a Celery worker stops on, kept for felab to say in one line.

Celery logs "Unrecoverable error" with its traceback and then returns from `worker_main`, so
the command would exit 0 after a page of Python. The machine's worker and the ingest both run
Celery under `kept_fatal()` and raise what it kept; `answers.broker_fault` says the one a
broker in a bad state causes (a key of another kind where a queue should be) in words.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from felab_worker.outage import BrokerOutage, install, remove


class FatalError(logging.Filter):
    """Keeps the error Celery stops on; its traceback then comes only with --debug."""

    def __init__(self) -> None:
        super().__init__()
        self.exc: BaseException | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Unrecoverable error") and record.exc_info:
            self.exc = record.exc_info[1]
            return False
        return True


@contextlib.contextmanager
def kept_fatal(outage: BrokerOutage | None = None) -> Iterator[FatalError]:
    """Run Celery inside: the filter holds the error it stopped on, if any; with `outage`, a
    broker that goes away and comes back is said in a line each (felab_worker.outage)."""
    fatal = FatalError()
    celery_log = logging.getLogger("celery.worker")
    celery_log.addFilter(fatal)
    if outage is not None:
        install(outage)
    try:
        yield fatal
    finally:
        celery_log.removeFilter(fatal)
        if outage is not None:
            remove(outage)

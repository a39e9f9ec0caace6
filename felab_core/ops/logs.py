"""One logging setup for every felab process (the bot, the ingest, a worker, the CLI).

Lines for people on a terminal, or one JSON object per line for a log shipper
(FELAB_LOG_FORMAT=json). Each record carries the job, the worker and the cohort it is about
when the code that logs knows them (`context`), and never a secret: the Discord token, the
broker's and the database's passwords and any password inside a URL are masked in the final
text, whatever logged them (Celery, discord.py, felab). felab's own loggers ("felab.*") log at
FELAB_LOG_LEVEL; libraries at the level the process asks for.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

from pythonjsonlogger.json import JsonFormatter

from felab_core.redact import add_secret, redact
from felab_core.settings import Settings
from felab_core.text import holds_hidden, is_hidden

__all__ = ["add_secret", "context", "redact", "secrets_of", "setup"]

_JOB = contextvars.ContextVar[int | None]("felab_job", default=None)
_WORKER = contextvars.ContextVar[int | None]("felab_worker", default=None)
_COHORT = contextvars.ContextVar[int | None]("felab_cohort", default=None)


@contextmanager
def context(
    *, job_id: int | None = None, worker: int | None = None, cohort: int | None = None
) -> Iterator[None]:
    """Within the block, every log record says which job, worker and cohort it is about."""
    tokens = [
        (var, var.set(value))
        for var, value in ((_JOB, job_id), (_WORKER, worker), (_COHORT, cohort))
        if value is not None
    ]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def secrets_of(settings: Settings) -> list[str]:
    """The secrets a process's settings hold: the Discord token, URL passwords."""
    found: list[str] = []
    if settings.discord_token is not None:
        found.append(settings.discord_token.get_secret_value())
    for url in (settings.broker_url, settings.database_url):
        if url:
            try:
                password = urlsplit(url).password
            except ValueError:
                continue
            if password:
                found += [password, unquote(password)]
    return found


#: The most characters of one log message: a peer's 200,000-character worker id or task name
#: is said by its start (masked first, so no secret is cut in two and half shown).
MAX_MESSAGE = 2_000


class _Context(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format: left to the handler's own error report, as before
            message = ""
        if len(message) > MAX_MESSAGE:
            shown = redact(message)
            record.msg = f"{shown[:MAX_MESSAGE]}... ({len(shown) - MAX_MESSAGE:,} characters cut)"
            record.args = ()
        record.job_id = _JOB.get()
        record.worker = _WORKER.get()
        record.cohort = _COHORT.get()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s%(where)s")

    def format(self, record: logging.LogRecord) -> str:
        parts = [
            f"{k}={getattr(record, k)}"
            for k in ("job_id", "worker", "cohort")
            if getattr(record, k, None) is not None
        ]
        record.where = f" [{' '.join(parts)}]" if parts else ""
        # Celery's and kombu's own lines quote what a broker or a peer sent: its escape codes
        # would act on the operator's terminal. Line breaks and tabs stay (a traceback's).
        text = redact(super().format(record))
        return "\n".join(
            "".join("?" if is_hidden(c) and c != "\t" else c for c in line)
            if holds_hidden(line, allowed="\t")
            else line
            for line in text.split("\n")
        )


class JsonLineFormatter(JsonFormatter):
    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        for key in ("job_id", "worker", "cohort"):
            value = getattr(record, key, None)
            if value is None:
                log_data.pop(key, None)
            else:
                log_data[key] = value

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def setup(settings: Settings, *, level: int | str = logging.WARNING) -> None:
    """Send every log record of this process to stderr, formatted as FELAB_LOG_FORMAT says and
    with its secrets masked. Safe to call again (the handler is replaced)."""
    for secret in secrets_of(settings):
        add_secret(secret)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter() if settings.log_format == "json" else TextFormatter())
    handler.addFilter(_Context())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_felab", False):
            root.removeHandler(old)
    handler._felab = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("felab").setLevel(settings.log_level.upper())
    logging.captureWarnings(True)

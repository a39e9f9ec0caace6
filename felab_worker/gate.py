"""The ingest's gate: of what is pushed to its inboxes, felab's own task messages only reach
Celery, and whatever Celery cannot take is dropped, never held.

The sender writes the whole message: every paired machine may push to the ingest's inbox, anyone
holding the pairing URL to the pairing inbox. Celery acts on much of what a message carries:
callbacks, errbacks, a chain or a chord are sent on by the ingest after the task, as the broker's
admin, to queues and with arguments of the sender's choosing (past the ACL table); an eta holds
the message in memory until then; an unknown task name logged Celery's traceback and a dump of
the message; a header Celery could not read left the message taken and never acknowledged, and
two such held both prefetch slots, so the ingest took nothing more (eighteenth sweep). No felab
process sends any of these, so a message with one is refused: one warning line, counted as
`felab_ingest_refused_total{reason="malformed"}`, and acknowledged (gone from the broker).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from celery.worker.consumer import Consumer

from felab_core.ops import metrics
from felab_core.ops.repeats import Repeated

log = logging.getLogger("felab.ingest")
#: A flood of them is said once a kind, then counted (felab_core.ops.repeats).
_SAID = Repeated(log)

#: What Celery sends on after a task, for whoever wrote the message.
_CANVAS = ("callbacks", "errbacks", "chain", "chord")
#: Headers Celery acts on that felab's own messages leave empty. `expires` is the beat's alone
#: (its reconcile messages lapse rather than pile up).
_UNSET = ("eta", "shadow", "group", "group_index")
_LONGEST_SHOWN = 60
#: A task id as Celery makes one (a UUID); it is written into Celery's own log lines.
_TASK_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}\Z")


def _shown(value: object) -> str:
    """A sender's value for a log line: escapes written out (no control codes), cut short."""
    text = ascii(value)
    return text if len(text) <= _LONGEST_SHOWN else text[:_LONGEST_SHOWN] + "..."


def _never_sent(name: str, value: object) -> str:
    return f"sets Celery's {name!r} ({_shown(value)}), which felab never sends"


def _header_refusal(headers: dict[str, Any]) -> str | None:
    if not isinstance(headers.get("id"), str) or not _TASK_ID.match(headers["id"]):
        return f"its task id {_shown(headers.get('id'))} is not one Celery makes"
    for name in _UNSET:
        if headers.get(name) is not None:
            return _never_sent(name, headers[name])
    expires = headers.get("expires")
    if expires is not None and (headers["task"] != "felab.reconcile" or not _is_time(expires)):
        return _never_sent("expires", expires)
    limits = headers.get("timelimit")
    if limits is not None and limits != [None, None]:
        return _never_sent("timelimit", limits)
    return None


def _is_time(value: object) -> bool:
    try:
        datetime.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


def _body_refusal(message: Any, task: Any) -> str | None:
    if message.content_type != "application/json":
        return f"its body is not JSON (content type {_shown(message.content_type)})"
    try:
        body = message.decode()
    except Exception as exc:  # bad JSON, bad encoding, nesting deeper than Python recurses
        return f"its body is not JSON ({type(exc).__name__})"
    if not (
        isinstance(body, list)
        and len(body) == 3
        and isinstance(body[0], list)
        and isinstance(body[1], dict)
        and isinstance(body[2], dict)
    ):
        return "its body is not felab's [args, kwargs, options]"
    args, kwargs, options = body
    for name in _CANVAS:
        if options.get(name):
            return f"asks for Celery's {name!r} after the task, which felab never sends"
    try:
        task.__header__(*args, **kwargs)  # the task's own signature (Celery's typing check)
    except TypeError:
        return f"its arguments do not fit {task.name}"
    return None


def refusal(message: Any, tasks: Mapping[str, Any]) -> str | None:
    """Why `message` (kombu's) is not a felab message for one of `tasks` (by name), or None."""
    headers = message.headers
    if not isinstance(headers, dict):
        return "it is not a task message (no headers)"
    name = headers.get("task")
    if not isinstance(name, str) or name not in tasks:
        return f"names an unknown task {_shown(name)}"
    return _header_refusal(headers) or _body_refusal(message, tasks[name])


def _drop(message: Any, why: str) -> None:
    metrics.INGEST_REFUSED.labels("malformed").inc()
    _SAID.warn(
        why,
        "refused {n:,} more messages on the broker that felab never sends (dropped)",
        "refused a message on the broker: %s (dropped)",
        why,
    )
    if not message.acknowledged:
        message.ack()


class GatedConsumer(Consumer):  # type: ignore[misc]  # Celery is untyped
    """Celery's consumer, with the gate in front of its task handler (`worker_consumer`)."""

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Callable[[Any], None]:
        handle = super().create_task_handler(*args, **kwargs)
        tasks = self.app.tasks

        def on_task_received(message: Any) -> None:
            why = refusal(message, tasks)
            if why is not None:
                _drop(message, why)
                return
            try:
                handle(message)
            except Exception as exc:  # Celery could not read it: dropped, not held for good
                _drop(message, f"Celery could not take it ({type(exc).__name__})")

        return on_task_received


def gated(app: Any) -> None:
    """Make `app`'s workers take their messages through the gate."""
    app.conf.worker_consumer = f"{__name__}:GatedConsumer"


def only_felab_tasks(app: Any) -> None:
    """Drop Celery's built-in tasks (celery.chain, .group, .map, .chord_unlock,
    .backend_cleanup ...): whoever may push to a queue may name one, and the worker would run
    it, or send on what the message held to any queue it knows. felab uses none of them; a
    message naming one is refused as an unknown task (the gate above)."""
    app.finalize(auto=True)
    for name in [n for n in app.tasks if not n.startswith("felab.")]:
        del app.tasks[name]

"""kombu's Redis transport, with a message that is not one dropped instead of fatal.

Anyone holding the pairing URL may push to the pairing inbox, and every paired machine to the
ingest's inbox (push only: felab_worker/acl.py). kombu decodes what it pops before Celery sees
it, and a body that is not its JSON envelope ('notjson', '[1]', '{"a": 1}') escaped as an
unrecoverable error: one push stopped the trusted ingest (thirteenth sweep). Such a body is now
logged and dropped; the broker already removed it (BRPOP), and nothing else is lost. So is an
envelope whose delivery tag kombu could not keep its acknowledgement under: a null tag had
stopped the ingest (exit 70, eighteenth sweep). What Celery then makes of a message is the
ingest's gate's to judge (felab_worker/gate.py).

An acknowledgement the broker did not take (it went away as the task ended) is let go of here
all the same: kombu kept the message counted as unacknowledged, the ingest's one-message window
stayed full, so it never asked the broker for another message, never noticed the broker had
gone and came back deaf (a restart under a busy ingest; CI, stop 34).

felab's Celery apps name it for redis:// and rediss:// (felab_worker/app.py registers it).
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import TRANSPORT_ALIASES, redis, virtual

from felab_core.ops import metrics
from felab_core.ops.repeats import Repeated
from felab_worker.answers import BrokerUnusable, shown

log = logging.getLogger("felab.broker")

#: What kombu raises on a body that is not its envelope: bad JSON, a list or a number where an
#: object goes, an object without `properties` or a delivery tag.
_NOT_AN_ENVELOPE = (ValueError, KeyError, TypeError, AttributeError)
#: kombu's tags are UUIDs; the tag is a key of the broker's unacknowledged-message hash.
_LONGEST_TAG = 128


#: A flood of junk is said once a kind, then counted (felab_core.ops.repeats).
_SAID = Repeated(log)


def _dropped(why: str) -> None:
    metrics.INGEST_REFUSED.labels("malformed").inc()
    _SAID.warn(
        why,
        "dropped {n:,} more messages on the broker that no felab process wrote",
        "dropped a message on the broker that no felab process wrote (%s)",
        why,
    )


def envelope_refusal(raw: Any) -> str | None:
    """Why kombu could not hold `raw` (a decoded envelope) until it is acknowledged, or None."""
    properties = raw.get("properties") if isinstance(raw, dict) else None
    if not isinstance(properties, dict):
        return "no properties"
    tag = properties.get("delivery_tag")
    if not isinstance(tag, str) or not 0 < len(tag) <= _LONGEST_TAG:
        return f"its delivery tag is {ascii(tag)[:40]}, not kombu's"
    info = properties.get("delivery_info")
    if not isinstance(info, dict) or not all(
        isinstance(info.get(key), str) for key in ("exchange", "routing_key")
    ):
        return "its delivery_info is not kombu's"
    return None


class BrokerAnswerWrong(BrokerUnusable):
    """BRPOP answered with something other than nothing or a (queue, message) pair."""


def _brpop_answer(said: Any, **_options: Any) -> tuple[Any, Any] | None:
    """BRPOP's answer as kombu reads it, refused unless Redis could have given it: an answer
    of another shape had been taken for a message no felab process wrote, dropped and read
    again, a warning a millisecond for as long as the broker answered so."""
    if said is None:
        return None
    if (
        isinstance(said, list | tuple)
        and len(said) == 2
        and all(isinstance(part, bytes | str) for part in said)
    ):
        return said[0], said[1]
    raise BrokerAnswerWrong(
        f"the broker answered BRPOP with {shown(said, 60)}, not as Redis does: is the broker "
        "URL's port felab's Redis?"
    )


class QoS(redis.QoS):
    """kombu's, letting go of a message here when the broker could not be told it is done:
    Redis keeps it among the unacknowledged (redelivered after the visibility timeout, and the
    ingest applies an event once), so nothing is lost, and the window opens again."""

    def ack(self, delivery_tag: Any) -> None:
        try:
            super().ack(delivery_tag)  # type: ignore[no-untyped-call]
        except BaseException:
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
            raise

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        try:
            super().reject(delivery_tag, requeue)  # type: ignore[no-untyped-call]
        except BaseException:
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
            raise


class Channel(redis.Channel):
    QoS = QoS

    def _create_client(self, asynchronous: bool = False) -> Any:
        client = super()._create_client(asynchronous)  # type: ignore[no-untyped-call]
        client.set_response_callback("BRPOP", _brpop_answer)
        return client

    def _brpop_read(self, **options: Any) -> bool:
        try:
            return bool(super()._brpop_read(**options))  # type: ignore[no-untyped-call]
        except BrokerAnswerWrong:
            raise  # the broker's fault, not a message's: the worker stops and says so
        except _NOT_AN_ENVELOPE as exc:
            _dropped(f"{type(exc).__name__}: {str(exc)[:200]}")
            return True


class Transport(redis.Transport):
    Channel = Channel

    def _deliver(self, message: Any, queue: str) -> None:
        why = envelope_refusal(message)
        if why is not None:
            _dropped(why)
            return
        super()._deliver(message, queue)  # type: ignore[no-untyped-call]


def register() -> None:
    """Make redis:// and rediss:// URLs use this transport in this process."""
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"

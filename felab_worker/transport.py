"""kombu's Redis transport, with a message that is not one dropped instead of fatal.

Anyone holding the pairing URL may push to the pairing inbox, and every paired machine to the
ingest's inbox (push only: felab_worker/acl.py). kombu decodes what it pops before Celery sees
it, and a body that is not its JSON envelope ('notjson', '[1]', '{"a": 1}') escaped as an
unrecoverable error: one push stopped the trusted ingest (thirteenth sweep). Such a body is now
logged and dropped; the broker already removed it (BRPOP), and nothing else is lost.

felab's Celery apps name it for redis:// and rediss:// (felab_worker/app.py registers it).
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import TRANSPORT_ALIASES, redis

log = logging.getLogger("felab.broker")

#: What kombu raises on a body that is not its envelope: bad JSON, a list or a number where an
#: object goes, an object without `properties` or a delivery tag.
_NOT_AN_ENVELOPE = (ValueError, KeyError, TypeError, AttributeError)


class Channel(redis.Channel):
    def _brpop_read(self, **options: Any) -> bool:
        try:
            return bool(super()._brpop_read(**options))  # type: ignore[no-untyped-call]
        except _NOT_AN_ENVELOPE as exc:
            log.warning(
                "dropped a message on the broker that no felab process wrote (%s: %s)",
                type(exc).__name__,
                str(exc)[:200],
            )
            return True


class Transport(redis.Transport):
    Channel = Channel


def register() -> None:
    """Make redis:// and rediss:// URLs use this transport in this process."""
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"

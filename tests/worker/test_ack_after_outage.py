"""An acknowledgement the broker did not take leaves the ingest able to read its inbox again.

The ingest reads one message at a time (solo pool, prefetch 1). A task that ended just as Redis
went away could not be acknowledged; kombu kept it counted, the window stayed full, the ingest
never asked the broker for the next message, never noticed the broker had gone, and stayed deaf
after Redis was back (stop 34's CI: no "is back", users never made again). Real redis-server of
the test's own, stopped by its PID; felab's kombu transport."""

from __future__ import annotations

from pathlib import Path

import pytest
from kombu import Connection
from redis.exceptions import ConnectionError as RedisConnectionError

from felab_worker.transport import register
from tests.e2e.fleet import RedisServer

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("done", ["ack", "reject"])
def test_a_message_the_broker_could_not_be_told_about_frees_the_window(
    tmp_path: Path, done: str
) -> None:
    register()
    server = RedisServer(tmp_path)
    try:
        with Connection(server.url, transport_options={"global_keyprefix": "t."}) as conn:
            inbox = conn.SimpleQueue("inbox")
            inbox.channel.basic_qos(0, 1, False)  # the ingest's window: one message
            inbox.put({"n": 1})
            message = inbox.get(timeout=5)
            qos = inbox.channel.qos
            assert not qos.can_consume()  # the one message is out
            server.stop()
            with pytest.raises(RedisConnectionError):
                message.ack() if done == "ack" else message.reject()
            assert qos.can_consume(), "the window stayed full: the consumer would go deaf"
            inbox.close()
    finally:
        server.stop()

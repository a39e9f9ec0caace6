"""A refusal a sender can make felab repeat is said once, then counted (sweep 24 M2: 100,000
junk messages wrote 100,032 warning lines, 16.7 MB of log)."""

from __future__ import annotations

import logging

import pytest

from felab_core.ops.repeats import Repeated


def test_a_flood_is_said_once_then_counted(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    said = Repeated(logging.getLogger("felab.test"), every_s=30, most_keys=2, clock=lambda: now[0])
    more = "dropped {n:,} more messages on the broker that no felab process wrote"
    with caplog.at_level(logging.WARNING, logger="felab.test"):
        for i in range(12_346):
            now[0] = i * 0.002  # 24.7 s of flood
            said.warn("junk", more, "dropped a message on the broker that no felab ... (%s)", i)
        said.warn("other", more, "a refusal of another kind")
        said.warn("third", more, "a third kind")  # past most_keys: counted with the others
        said.warn("fourth", more, "a fourth kind")
        now[0] = 31.0
        said.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "dropped a message on the broker that no felab ... (0)",
        "a refusal of another kind",
        "a third kind",
        "dropped 12,345 more messages on the broker that no felab process wrote in the last 31 s",
    ], lines
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="felab.test"):
        now[0] = 62.0
        said.flush()  # quiet a whole period: said in full when it comes back
        said.warn("junk", more, "back again")
    assert [r.getMessage() for r in caplog.records] == [
        "dropped 1 more messages on the broker that no felab process wrote in the last 37 s",
        "back again",
    ]


def test_a_count_said_to_a_handler_that_warns_again_does_not_deadlock() -> None:
    """The counts were logged under the lock: a handler that warns through the same Repeated
    (a log shipper's own refusal, say) waited for it forever."""
    import threading

    now = [0.0]
    log = logging.getLogger("felab.test.reentrant")
    said = Repeated(log, every_s=30, clock=lambda: now[0])

    class Echo(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "more" in record.getMessage():
                said.warn("echo", "{n} more echoes", "an echo")

    log.addHandler(Echo())
    try:
        said.warn("junk", "{n} more junk", "junk")
        said.warn("junk", "{n} more junk", "junk")
        now[0] = 31.0
        done = threading.Thread(target=said.flush, daemon=True)
        done.start()
        done.join(5)
        assert not done.is_alive(), "flush waited on its own lock"
    finally:
        log.handlers.clear()

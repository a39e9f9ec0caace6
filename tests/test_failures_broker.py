"""A broker that refuses felab's user was reached: it is said as a refusal to fix (exit 2), not
as "could not reach the broker ... is Redis running?" (exit 3), on every path that ends in the
CLI's one error boundary (felab_core.failures.explain)."""

from __future__ import annotations

import pytest
from redis.exceptions import AuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError

from felab_core.failures import EXIT_UNREACHABLE, EXIT_USAGE, explain
from felab_core.settings import get_settings


def test_a_refused_broker_user_is_a_setting_to_fix_not_an_outage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FELAB_BROKER_URL", "redis://admin:hunter2-secret@127.0.0.1:6390/0")
    get_settings.cache_clear()
    try:
        refused = explain(
            AuthenticationError("invalid username-password pair or user is disabled.")
        )
        away = explain(RedisConnectionError("Error 111 connecting to 127.0.0.1:6390."))
    finally:
        get_settings.cache_clear()
    assert refused is not None and away is not None
    assert refused.exit_code == EXIT_USAGE, refused
    assert "refused its user: invalid username-password pair" in refused.message
    assert "Check the user and password in FELAB_BROKER_URL" in refused.message
    assert "Is Redis running" not in refused.message and "hunter2-secret" not in refused.message
    assert away.exit_code == EXIT_UNREACHABLE and "could not reach the broker" in away.message

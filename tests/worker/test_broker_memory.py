"""`felab broker setup` on a Redis the operator runs: its memory capped when nobody capped it
(sweep 24 M1: proto-max-bulk-len was lowered, but maxmemory left at 0 without a word, and one
machine's 150 pushes of 7 MB took Redis to 771 MB in 2.6 s); a cap the operator set is kept."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import redis

from felab_worker.names import INGEST_QUEUE, Names
from tests.e2e.fleet import FELAB, PREFIX, RedisServer, base_env


def _setup(broker: RedisServer, tmp_path: Path, *args: str, **env: str) -> str:
    out = subprocess.run(
        [FELAB, "broker", "setup", *args],
        env={**base_env(), "FELAB_DATA_DIR": str(tmp_path / "data"), **broker.env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_redis_without_a_memory_cap_gets_one_that_refuses_writes(
    broker: RedisServer, tmp_path: Path
) -> None:
    admin = broker.client()
    assert admin.config_get("maxmemory")["maxmemory"] == "0"
    said = _setup(broker, tmp_path, FELAB_BROKER_MAX_MEMORY_BYTES=str(64 * 2**20))
    assert (
        "Redis had no memory cap (maxmemory 0): set to 64 MiB, refusing writes when full "
        "(noeviction); FELAB_BROKER_MAX_MEMORY_BYTES sets another" in said
    ), said
    assert admin.config_get("maxmemory")["maxmemory"] == str(64 * 2**20)
    assert admin.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    # a flood of 7 MB pushes is refused once full, and what was there stays
    inbox = Names(PREFIX).key(INGEST_QUEUE)
    admin.set(f"{PREFIX}kept", "queued job")
    with pytest.raises(redis.exceptions.ResponseError, match="maxmemory"):
        for _ in range(20):
            admin.lpush(inbox, b"J" * 7_000_000)
    assert admin.get(f"{PREFIX}kept") == "queued job"
    admin.delete(inbox)
    # set once: the next setup finds felab's own cap there and keeps it
    again = json.loads(_setup(broker, tmp_path, "--json"))
    assert again["memory_cap_bytes"] == 64 * 2**20 and again["memory_cap_set"] is False


def test_a_memory_cap_the_operator_set_is_left_and_said(
    broker: RedisServer, tmp_path: Path
) -> None:
    admin = broker.client()
    admin.config_set("maxmemory", "100mb")
    admin.config_set("maxmemory-policy", "allkeys-lru")
    said = _setup(broker, tmp_path)
    assert "Redis's memory cap is 100 MiB (maxmemory, set there): left as it is" in said, said
    assert "its policy allkeys-lru drops keys when full" in said, said
    assert admin.config_get("maxmemory")["maxmemory"] == str(100 * 2**20)
    assert admin.config_get("maxmemory-policy")["maxmemory-policy"] == "allkeys-lru"

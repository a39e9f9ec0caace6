"""The worker's side of a job, without Celery: felab's own soft time limit stops the run inside
its event loop and says why (Celery's soft limit cannot: its signal is swallowed there)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from felab_core.jobs.messages import JobMessage
from felab_core.jobs.run import execute
from felab_core.jobs.workload import Limits
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.settings import Settings
from felab_worker.app import soft_time_limit

LIMITS = Limits(concurrency=4, requests=10, max_tokens=64, per_hour=10)


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[Path]:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.01, itl_s=0.05)).start_in_thread()
    tf = tmp_path / "targets.toml"
    tf.write_text(f'[targets.mlx]\nurl = "http://127.0.0.1:{srv.port}"\nmodel = "tiny"\n')
    yield tf
    srv.stop_thread()


def _msg(**params: int) -> JobMessage:
    return JobMessage(
        job_id=1, attempt="a1", worker_id=7, target="mlx", preset="quick", params=params
    )


def test_a_run_past_the_soft_limit_is_stopped_and_says_why(targets: Path) -> None:
    events: list[dict[str, Any]] = []
    t0 = time.monotonic()
    # 3 requests of 32 tokens at 20 tokens/s: ~5 s; the limit stops it at 0.5 s.
    execute(
        _msg(max_tokens=32),
        targets_file=targets,
        limits=LIMITS,
        emit=events.append,
        time_limit_s=0.5,
    )
    assert time.monotonic() - t0 < 3
    last = events[-1]
    assert last["kind"] == "failed" and last["attempt"] == "a1"
    assert last["body"]["reason"] == (
        "the job ran past its time limit (0.5 s) and was stopped: ask for fewer requests or tokens"
    )


def test_a_run_within_the_limit_reports_its_result(targets: Path) -> None:
    events: list[dict[str, Any]] = []
    execute(
        _msg(max_tokens=2), targets_file=targets, limits=LIMITS, emit=events.append, time_limit_s=30
    )
    assert events[-1]["kind"] == "result" and events[-1]["body"]["rows"]


def test_the_soft_limit_comes_the_margin_before_the_hard_one() -> None:
    assert soft_time_limit(Settings(job_time_limit_s=1800)) == 1770
    assert soft_time_limit(Settings(job_time_limit_s=4, job_soft_margin_s=2.5)) == 1.5
    assert soft_time_limit(Settings(job_time_limit_s=2, job_soft_margin_s=0)) is None
    assert soft_time_limit(Settings(job_time_limit_s=20)) is None  # the default margin yields
    with pytest.raises(ValidationError, match="FELAB_JOB_SOFT_MARGIN_S=30 is not shorter"):
        Settings(job_time_limit_s=20, job_soft_margin_s=30)  # a margin given is meant
    with pytest.raises(ValidationError, match="every worker would look offline"):
        Settings(worker_heartbeat_s=60, worker_offline_after_s=5)


def test_a_worker_reports_target_names_and_kinds_never_urls(tmp_path: Path) -> None:
    from felab_core.jobs.run import target_names

    tf = tmp_path / "targets.toml"
    tf.write_text(
        '[targets.gpu]\nkind = "vllm"\nurl = "http://10.1.2.3:8000"\n'
        '[targets.mlx]\nurl = "http://127.0.0.1:9999"\n'
    )
    names = target_names(tf)
    assert names is not None and names["gpu"] == "vllm" and names["mlx"] == "mlx"
    assert "10.1.2.3" not in repr(names) and "9999" not in repr(names)
    assert set(target_names(None) or {}) == {
        "ollama",
        "llamacpp",
        "mlx",
        "vllm",
        "sglang",
        "trtllm",
    }
    tf.write_text("[targets.gpu\n")
    assert target_names(tf) is None  # unreadable: nothing reported, the last list is kept


def test_a_chat_job_reports_its_cache_and_ttft_by_turn(tmp_path: Path) -> None:
    script = Script(
        persona="mlx", ttft_s=0.005, itl_s=0.001, prefill_s_per_token=0.0001, prefix_cache=True
    )
    srv = ScriptedServer(script).start_in_thread()
    tf = tmp_path / "targets.toml"
    tf.write_text(f'[targets.mlx]\nurl = "http://127.0.0.1:{srv.port}"\nmodel = "tiny"\n')
    events: list[dict[str, Any]] = []
    msg = JobMessage(job_id=1, attempt="a1", worker_id=7, target="mlx", preset="chat", params={})
    limits = Limits(concurrency=4, requests=20, max_tokens=64, per_hour=10)
    try:
        execute(msg, targets_file=tf, limits=limits, emit=events.append, time_limit_s=60)
    finally:
        srv.stop_thread()
    last = events[-1]
    assert last["kind"] == "result", last
    (row,) = last["body"]["rows"]
    assert 0.5 < float(row["cached_share"]) < 1
    assert len(row["ttft_p50_by_turn_ms"].split("/")) == 5
    (run,) = last["body"]["record"]["runs"]
    assert {r["turn"] for r in run["requests"]} == {1, 2, 3, 4, 5}
    assert all(r["cached_tokens"] is not None for r in run["requests"])


def test_a_failure_names_the_target_never_its_address(tmp_path: Path) -> None:
    """Sweep 20 (b) B26: 'nothing listens at http://127.0.0.1:PORT' (or an internal host name)
    went from the machine's targets file to the database and the cohort's channel."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    tf = tmp_path / "targets.toml"
    tf.write_text(
        f'[targets.llama]\nurl = "http://tok:S3CRET@127.0.0.1:{port}"\nmodel = "tiny"\n'
        'kind = "llamacpp"\n'
    )
    events: list[dict[str, Any]] = []
    msg = JobMessage(job_id=1, attempt="a1", worker_id=7, target="llama", preset="quick")
    execute(msg, targets_file=tf, limits=LIMITS, emit=events.append, time_limit_s=30)
    reason = events[-1]["body"]["reason"]
    assert events[-1]["kind"] == "failed" and "target 'llama'" in reason, reason
    assert "127.0.0.1" not in reason and str(port) not in reason and "S3CRET" not in reason

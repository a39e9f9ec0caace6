"""A --model the server does not list is said in the run's notes (A15)."""

from __future__ import annotations

from pathlib import Path

from felab_core.lab.scripted_server import Script
from tests.engine.scripted_bench import bench


def test_a_model_the_server_does_not_list_is_said(tmp_path: Path) -> None:
    """Twenty-first sweep A15: --model other was stored though the server lists only m."""
    script = Script(model="m", persona="vllm")
    done = bench(script, tmp_path / "r.json", "--requests", "1", "--model", "other", target="vllm")
    assert "the server does not list the model given ('other')" in done.output
    assert "lists 'm'" in done.output


def test_a_listed_model_is_not_noted(tmp_path: Path) -> None:
    script = Script(model="org/m", persona="vllm")
    done = bench(script, tmp_path / "r.json", "--requests", "1", "--model", "org/m", target="vllm")
    assert "does not list" not in done.output

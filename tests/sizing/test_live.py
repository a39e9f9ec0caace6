"""Against real things: a real llama-server on the tiny model, and the tiny model's real files.

Fixtures come from tests/lab_fixtures.py (`tiny_model`, `llama_server`, `vllm_server`); the
llama-server fixture starts with `-c 4096 --parallel 2 --metrics`. `FELAB_TEST_REAL_SERVERS=0`
skips the server tests; vLLM is opt-in with `FELAB_TEST_VLLM=1`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.serve import ServerProcess, free_port
from felab_core.sizing import kv, metrics_scrape, slots, slots_live, vllm_live
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.hf_config import from_hf_config

runner = CliRunner()
WIDE = {"COLUMNS": "220"}


def _expected_bytes_per_token(tiny: Any, bytes_each: int) -> int:
    spec = tiny.spec
    return 2 * spec.n_layers * spec.n_kv_heads * spec.head_dim * bytes_each


def test_kv_from_the_tiny_models_gguf_and_config_agree(tiny_model: Any) -> None:
    from_file = from_gguf(tiny_model.gguf_path)
    from_config = from_hf_config(tiny_model.hf_dir)
    want = _expected_bytes_per_token(tiny_model, 2)
    assert kv.kv_bytes_per_token(from_file, "f16").bytes == want
    assert kv.kv_bytes_per_token(from_config, "f16").bytes == want
    assert from_file.weights_bytes and from_config.weights_bytes


def test_size_kv_cli_on_the_tiny_model(tiny_model: Any) -> None:
    want = _expected_bytes_per_token(tiny_model, 2)
    for flag, path in (("--gguf", tiny_model.gguf_path), ("--config", tiny_model.hf_dir)):
        result = runner.invoke(app, ["size", "kv", flag, str(path)], env=WIDE)
        assert result.exit_code == 0, result.output
        assert f"= {want:,} bytes" in result.output


def test_slots_read_from_the_live_llama_server(llama_server: Any) -> None:
    verdict = slots_live.read_live(llama_server.base_url, ctx=4096, need=3000)
    assert verdict.slots == 2
    assert verdict.per_slot == 2048  # -c 4096 split over --parallel 2
    assert verdict.unified is False and verdict.shared_total == 4096
    assert verdict.fits is False
    assert verdict.fix is not None and verdict.fix.flags == "-c 6144 --parallel 2"
    # the flags alone predict what the server reports
    assert slots.check_flags(4096, 2, False).per_slot == verdict.per_slot


def test_size_slots_url_cli(llama_server: Any) -> None:
    result = runner.invoke(
        app,
        ["size", "slots", "--url", llama_server.base_url, "-c", "4096", "--need", "3000"],
        env=WIDE,
    )
    assert result.exit_code == 0, result.output
    assert "does not fit" in result.output
    assert "2 seats of 2,048 tokens" in result.output


# (llama-server flags, -c, --parallel or None, -kvu): each run on a real llama-server
FLAG_SETS = [
    (("-c", "4096", "--parallel", "2"), 4096, 2, False),
    (("-c", "4096", "--parallel", "2", "-kvu"), 4096, 2, True),
    (("-c", "4096"), 4096, None, False),
    (("-c", "3000", "--parallel", "3"), 3000, 3, False),
    (("-c", "16384", "--parallel", "1"), 16384, 1, False),
]


@pytest.mark.parametrize(
    ("flags", "ctx", "parallel", "unified"), FLAG_SETS, ids=[" ".join(f[0]) for f in FLAG_SETS]
)
def test_flags_predict_what_a_real_llama_server_does(
    llama_server: Any,
    tiny_model: Any,
    tmp_path: Path,
    flags: tuple[str, ...],
    ctx: int,
    parallel: int | None,
    unified: bool,
) -> None:
    """check_flags (before the server starts) agrees with /slots and the server's KV buffer.

    `-lv 4` makes llama-server log its cache size ('llama_kv_cache: size = N MiB'), which is
    compared with felab's bytes for the cache it predicted.
    """
    shape = from_gguf(tiny_model.gguf_path)
    predicted = slots.check_flags(ctx, parallel, unified, shape=shape)
    log_path = tmp_path / "llama-server.log"
    args = [*flags, "-t", "1", "-lv", "4"]
    with ServerProcess(
        "llamacpp", tiny_model.gguf_path, port=free_port(), extra_args=args, log_path=log_path
    ) as server:
        live = slots_live.read_live(server.base_url, ctx=ctx, shape=shape)
    assert (live.slots, live.per_slot) == (predicted.slots, predicted.per_slot)
    if live.slots > 1:
        assert live.unified == predicted.unified
        assert live.shared_total == predicted.shared_total
    text = log_path.read_text(errors="replace")
    sizes = re.findall(r"llama_kv_cache: size =\s*([\d.]+) MiB", text)
    assert sizes, f"no 'llama_kv_cache: size' line in llama-server's log:\n{text[-2000:]}"
    assert predicted.memory is not None
    assert float(sizes[0]) == pytest.approx(
        float(predicted.memory.bytes / (1024 * 1024)), abs=0.005
    )


def test_metrics_before_and_after_a_request(llama_server: Any) -> None:
    before = metrics_scrape.scrape(llama_server.base_url)
    with httpx.Client(timeout=30) as client:
        response = client.post(
            f"{llama_server.base_url}/v1/completions",
            json={
                "model": llama_server.model,
                "prompt": "hello",
                "max_tokens": 8,
                "temperature": 0,
            },
        )
    response.raise_for_status()
    after = metrics_scrape.scrape(llama_server.base_url)
    rates = metrics_scrape.diff(before, after)
    assert rates.engine == "llama.cpp"
    assert rates.generation_tokens == response.json()["usage"]["completion_tokens"] == 8
    assert rates.stream_tokens_per_second is not None and rates.stream_tokens_per_second > 0


def test_a_live_vllm_cache_reading(vllm_server: Any) -> None:
    reading = vllm_live.read_live_vllm(vllm_server.base_url)
    cap = reading.capacity()
    assert cap.max_len == 2048
    assert cap.tokens > 0 and cap.whole_requests >= 1

"""The real engines serving felab's tiny model: token counts, identical greedy text, /metrics.

llama.cpp and MLX run in the default suite (the first run builds llama-server: ~9 minutes on 2
cores, then cached); vLLM only with FELAB_TEST_VLLM=1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tokenizers import Tokenizer

from felab_core.lab.serve import ServerProcess, free_port, slot_check
from felab_core.lab.tiny_model import IM_END, IM_START, TinyModel
from tests.lab_fixtures import RunningServer

PROMPTS = ("Hello there, count to ten", "Why is --parallel 4 -c 8192 a trap?", "hi")


@dataclass
class Streamed:
    pieces: list[str] = field(default_factory=list)  # text of each content chunk
    chunks: list[dict[str, Any]] = field(default_factory=list)
    comments: int = 0  # SSE comment lines (MLX's keep-alives)
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def stream_chat(server: RunningServer, content: str, max_tokens: int) -> Streamed:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    out = Streamed()
    with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", json=body, timeout=60) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith(":"):
                out.comments += 1
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            out.chunks.append(chunk)
            if chunk.get("usage"):
                out.usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    out.pieces.append(text)
                if choice.get("finish_reason"):
                    out.finish_reason = choice["finish_reason"]
    return out


def chat(server: RunningServer, content: str, max_tokens: int) -> dict[str, Any]:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    r = httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=60)
    r.raise_for_status()
    data: dict[str, Any] = r.json()
    return data


def _check_counts(server: RunningServer, n: int = 40) -> Streamed:
    got = stream_chat(server, PROMPTS[0], n)
    assert got.usage is not None, "usage must come with stream_options.include_usage"
    assert got.usage["completion_tokens"] == n
    assert len(got.pieces) == n  # one non-empty chunk per token with this model
    assert got.text == server.tiny.expected_text(n)
    assert got.finish_reason == "length"
    return got


def test_llama_server_counts_every_token(llama_server: RunningServer) -> None:
    got = _check_counts(llama_server)
    first = got.chunks[0]["choices"][0]["delta"]
    assert first.get("role") == "assistant" and not first.get("content")  # role-only: no token
    assert any("timings" in c for c in got.chunks)  # llama.cpp's own decode timings


def test_mlx_server_counts_every_token(mlx_server: RunningServer) -> None:
    _check_counts(mlx_server)


def test_same_greedy_text_on_every_engine(
    llama_server: RunningServer, mlx_server: RunningServer
) -> None:
    for prompt in PROMPTS:
        a, b = chat(llama_server, prompt, 24), chat(mlx_server, prompt, 24)
        text_a = a["choices"][0]["message"]["content"]
        text_b = b["choices"][0]["message"]["content"]
        assert text_a == text_b == llama_server.tiny.expected_text(24)
        # the same tokenizer and chat template: the prompts count the same
        assert a["usage"]["prompt_tokens"] == b["usage"]["prompt_tokens"]


def test_llama_tokenizer_matches_the_hf_tokenizer(
    llama_server: RunningServer, tiny_model: TinyModel
) -> None:
    tok = Tokenizer.from_file(str(tiny_model.hf_dir / "tokenizer.json"))
    texts = [
        f"{IM_START}user\nHello there, count to ten{IM_END}\n{IM_START}assistant\n",
        "lorem ipsum dolor sit amet, é ü 日本 \t tabs  and  spaces",
        " leading space and trailing ",
    ]
    for text in texts:
        r = httpx.post(
            f"{llama_server.base_url}/tokenize",
            json={"content": text, "add_special": False, "parse_special": True},
            timeout=10,
        )
        r.raise_for_status()
        assert r.json()["tokens"] == tok.encode(text, add_special_tokens=False).ids, text


def test_llama_metrics_parse(llama_server: RunningServer) -> None:
    chat(llama_server, "warm up the counters", 4)
    r = httpx.get(f"{llama_server.base_url}/metrics", timeout=10)
    r.raise_for_status()
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    assert any(name.startswith("llamacpp:") for name in families)
    tokens = [
        s.value
        for f in families.values()
        for s in f.samples
        if s.name.startswith("llamacpp:tokens_predicted_total")
    ]
    assert tokens and tokens[0] >= 4


def test_llama_reports_its_slots(llama_server: RunningServer) -> None:
    info = llama_server.info
    assert info.total_slots == 2
    assert info.slot_n_ctx == (2048, 2048)  # -c 4096 split over --parallel 2
    verdict = llama_server.process.slot_verdict
    assert verdict is not None and verdict.per_slot == 2048  # the check agrees with the server
    assert info.version


def test_slot_trap_on_a_real_server(
    tiny_model: TinyModel, llama_server: RunningServer, tmp_path: Any
) -> None:
    """-c 2048 --parallel 4 gives each slot 512 tokens, and a longer reply is cut there."""
    flags = ["-c", "2048", "--parallel", "4", "-t", "1"]
    predicted = slot_check(flags)
    assert predicted is not None and predicted.per_slot == 512
    server = ServerProcess(
        "llamacpp",
        tiny_model.gguf_path,
        port=free_port(),
        extra_args=flags,
        log_path=tmp_path / "trap.log",
    )
    with server:
        assert server.info is not None and server.info.slot_n_ctx == (512,) * 4
        running = RunningServer(
            "llamacpp", server.base_url, server.model_name, server.info, server, tiny_model
        )
        got = chat(running, PROMPTS[0], 1000)
        usage = got["usage"]
        assert usage["prompt_tokens"] + usage["completion_tokens"] <= 512
        assert usage["completion_tokens"] < 1000
    assert not server.is_running()


def test_slow_model_makes_decode_time_visible(
    slow_llama_server: RunningServer, llama_server: RunningServer
) -> None:
    slow = chat(slow_llama_server, PROMPTS[0], 32)
    fast = chat(llama_server, PROMPTS[0], 32)
    assert slow["choices"][0]["message"]["content"] == slow_llama_server.tiny.expected_text(32)
    slow_ms = slow["timings"]["predicted_per_token_ms"]
    fast_ms = fast["timings"]["predicted_per_token_ms"]
    assert slow_ms > 3 * fast_ms and slow_ms > 2.0, (slow_ms, fast_ms)


# ------------------------------------------------------------------ vLLM (FELAB_TEST_VLLM=1)


def test_vllm_counts_every_token(vllm_server: RunningServer) -> None:
    _check_counts(vllm_server)


def test_vllm_same_text_as_llama(vllm_server: RunningServer, llama_server: RunningServer) -> None:
    for prompt in PROMPTS:
        a, b = chat(llama_server, prompt, 24), chat(vllm_server, prompt, 24)
        assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
        assert a["usage"]["prompt_tokens"] == b["usage"]["prompt_tokens"]


def test_vllm_metrics_parse(vllm_server: RunningServer) -> None:
    chat(vllm_server, "warm up the counters", 4)
    r = httpx.get(f"{vllm_server.base_url}/metrics", timeout=10)
    r.raise_for_status()
    names = {f.name for f in text_string_to_metric_families(r.text)}
    assert any(name.startswith("vllm:") for name in names)
    assert vllm_server.info.version


@pytest.mark.parametrize("engine", ["mlx"])
def test_mlx_reports_itself(engine: str, mlx_server: RunningServer) -> None:
    assert mlx_server.info.version and mlx_server.info.version.startswith("mlx-lm ")
    assert mlx_server.model == str(mlx_server.tiny.hf_dir)

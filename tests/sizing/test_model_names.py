"""Twentieth sweep (a2) A2-13: `numbers model` refused 100 GB for llama3.1:8b but stored it for
meta-llama/Llama-3.1-8B-Instruct (the name vLLM and mlx_lm report) and for names that say
their size (Qwen/Qwen2.5-0.5B-Instruct, gemma2:2b, mystery-7b)."""

from __future__ import annotations

import pytest

from felab_core.sizing.known_models import file_size_problem
from felab_core.sizing.model_names import params_in_name, table_names


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "100 GB cannot hold Llama 3.1 8B: its 8.0B weights"),
        ("mlx-community/Llama-3.1-8B-Instruct-4bit", "cannot hold Llama 3.1 8B"),
        (
            "Qwen/Qwen2.5-0.5B-Instruct",
            "100 GB cannot hold Qwen/Qwen2.5-0.5B-Instruct: its name says about 0.5B weights, "
            "which make files of at most about 3.19 GB (34 bits a weight)",
        ),
        ("gemma2:2b", "its name says about 2B weights"),
        ("mystery-7b", "its name says about 7B weights"),
    ],
)
def test_a_size_a_named_model_cannot_have_is_refused(name: str, said: str) -> None:
    problem = file_size_problem(name, 100_000_000_000)
    assert problem is not None and said in problem, problem


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 16_100_000_000),  # bf16
        ("mlx-community/Llama-3.1-8B-Instruct-4bit", 4_500_000_000),
        ("Qwen/Qwen2.5-0.5B-Instruct", 990_000_000),
        ("gemma2:2b", 10_500_000_000),  # 2.6B weights in 32-bit floats
        ("qwen3-30b-a3b", 61_000_000_000),  # the 3B is its active share
        ("mixtral-8x22b", 281_000_000_000),
        ("mystery", 100_000_000_000),  # nothing says its size
    ],
)
def test_a_size_the_model_can_have_passes(name: str, size: int) -> None:
    assert file_size_problem(name, size) is None


def test_names_read_as_felab_s_table_and_a_name_s_size() -> None:
    assert table_names("mlx-community/Llama-3.1-8B-Instruct-4bit")[-1] == "Llama-3.1-8B-Instruct"
    assert params_in_name("llama-3.1-8b-q4_k_m.gguf") == 8e9
    assert params_in_name("phi3:3.8b") == pytest.approx(3.8e9)
    assert params_in_name("mixtral-8x7b") == 56e9
    assert params_in_name("gpt-4o") is None

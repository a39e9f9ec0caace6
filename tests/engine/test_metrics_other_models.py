"""/metrics series of another model are not this run's (sweep 22 a A12).

A server serving several models labels each counter with model_name; felab had summed every
label set, so a busy neighbour's tokens were printed as "the server wrote N tokens" of the
model timed.
"""

from __future__ import annotations

import pytest

from felab_core.sizing.errors import SizingError
from felab_core.sizing.metrics_scrape import parse_metrics

TWO = (
    'vllm:num_requests_running{model_name="m"} 0\n'
    'vllm:generation_tokens_total{model_name="m"} 60\n'
    'vllm:prompt_tokens_total{model_name="m"} 30\n'
    'vllm:generation_tokens_total{model_name="big"} 180\n'
    'vllm:prompt_tokens_total{model_name="big"} 30\n'
)
OTHER = (
    'vllm:generation_tokens_total{model_name="other"} 60\n'
    'vllm:prompt_tokens_total{model_name="other"} 30\n'
)


def test_only_the_timed_models_series_are_read() -> None:
    snap = parse_metrics(TWO, taken_at=0.0, model="m")
    assert snap.get("generation_tokens") == 60
    assert snap.get("prompt_tokens") == 30


def test_counters_of_another_model_alone_are_not_this_models() -> None:
    with pytest.raises(SizingError, match=r"only for other models \(other\), not m"):
        parse_metrics(OTHER, taken_at=0.0, model="m")


def test_several_models_and_no_model_named_is_said() -> None:
    with pytest.raises(SizingError, match="several models"):
        parse_metrics(TWO, taken_at=0.0)


def test_one_labelled_model_or_none_is_the_only_series() -> None:
    assert parse_metrics(OTHER.replace("other", "m"), taken_at=0.0).get("generation_tokens") == 60
    plain = "vllm:generation_tokens_total 60\nvllm:prompt_tokens_total 30\n"
    assert parse_metrics(plain, taken_at=0.0, model="m").get("generation_tokens") == 60
    assert parse_metrics(TWO, taken_at=0.0, model="M").get("generation_tokens") == 60

"""What a model's name says of it: the name a Hugging Face server (vLLM, mlx_lm) reports for a
model of felab's table, and the parameter count many names carry ("8B", "0.5b", "8x7b").
`numbers model` checks a typed file size against either (A2-13: 100 GB was stored for
meta-llama/Llama-3.1-8B-Instruct though refused for llama3.1:8b)."""

from __future__ import annotations

import re

#: What a converter adds to a Hugging Face name: a quantisation or a format.
_FORMAT_SUFFIX = re.compile(
    r"([-_.](\d+bit|bf16|fp16|f16|fp8|int4|int8|awq|gptq|gguf|mlx|q\d\w*))+$", re.IGNORECASE
)
#: A parameter count in a name: 8b, 0.5B, 3.8b or 8x7b, not the a3b of an active count.
_PARAMS = re.compile(r"(?<![0-9A-Za-z.])(?:(\d{1,3})x)?(\d{1,4}(?:\.\d{1,3})?)b(?![a-z])", re.I)
#: Names round their count (gemma2:2b has 2.6B weights, qwen2.5:7b 7.6B): room for that.
NAME_ROUNDING = 1.5


def table_names(name: str) -> tuple[str, ...]:
    """The names to look `name` up by in felab's table: as given, then without its Hugging
    Face organisation (meta-llama/) and a converter's suffix (-4bit, -GGUF)."""
    base = name.strip().rsplit("/", 1)[-1]
    plain = _FORMAT_SUFFIX.sub("", base)
    return tuple(dict.fromkeys((name, base, plain)))


def params_in_name(name: str) -> float | None:
    """The largest parameter count `name` gives ("Qwen2.5-0.5B-Instruct": 0.5e9), None if none."""
    found = [
        float(count) * (int(experts) if experts else 1) * 1e9
        for experts, count in _PARAMS.findall(name)
        if float(count) > 0
    ]
    return max(found, default=None)

"""Every server kind felab knows, and what is particular to each: one entry per kind.

The rest of felab reads this table: the default targets (port, API, model), what makes a server
write exactly `max_tokens`, which ones must be sent a model name, which publish Prometheus
counters, which `felab serve` can start (the model's flag and file) and how long they take to be
ready. Adding a kind
(TensorRT-LLM's `trtllm-serve` is the worked example) is one `ServerKind` member and one entry
below, plus its test; how felab recognises a kind from its answers stays in probe.py, since
that is logic, not a fact (a kind without a rule there is timed, with a note that its identity
could not be confirmed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from felab_core.engine.apis import Api
from felab_core.errors import Invalid


class ServerKind(StrEnum):
    OLLAMA = "ollama"
    LLAMACPP = "llamacpp"
    MLX = "mlx"
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"
    OPENAI = "openai"  # any OpenAI-compatible server; identity not checked

    @property
    def label(self) -> str:
        return TRAITS[self].label

    @property
    def traits(self) -> KindTraits:
        return TRAITS[self]


@dataclass(frozen=True, slots=True)
class LabStart:
    """How `felab serve` starts this kind on the lab's machine (felab_core.lab.serve builds the
    argv: `<engine> <model_flag> MODEL --host H --port P`, plus vLLM's CPU defaults)."""

    model_flag: str  # the flag before the model's path
    model_file: Literal["gguf", "hf"]  # one GGUF file, or a Hugging Face folder
    startup_timeout_s: float  # how long it may take to answer its first completion


@dataclass(frozen=True, slots=True)
class KindTraits:
    """One kind's facts. `port` is where felab expects it (the default target's address)."""

    label: str
    port: int | None
    api: Api = Api.OPENAI_CHAT
    default_model: str | None = None  # what the default target sends when none is named
    needs_model: bool = False  # a request must name a model (else the server refuses it)
    #: Answers with the one model it loaded whatever a request names (llama-server); a server
    #: that lists several (llama.cpp's router) does follow the name.
    ignores_model_name: bool = False
    force_length: dict[str, object] = field(default_factory=dict)  # write exactly max_tokens
    per_chunk_usage: bool = False  # can put usage on every chunk (vLLM's continuous stats)
    metrics: bool = False  # publishes Prometheus counters at /metrics
    note: str | None = None  # said whenever the default target is used
    lab: LabStart | None = None  # None: `felab serve` cannot start it


TRAITS: dict[ServerKind, KindTraits] = {
    ServerKind.OLLAMA: KindTraits(
        "Ollama", 11434, Api.OLLAMA, default_model="llama3.1:8b", needs_model=True
    ),
    ServerKind.LLAMACPP: KindTraits(
        "llama.cpp",
        8080,
        force_length={"ignore_eos": True},
        metrics=True,
        ignores_model_name=True,
        lab=LabStart("-m", "gguf", startup_timeout_s=60.0),
    ),
    ServerKind.MLX: KindTraits(
        "MLX",
        8081,
        note=(
            "mlx_lm.server also defaults to port 8080, where llama-server lives; felab "
            "expects MLX on 8081: start it with --port 8081 (felab serve mlx does)"
        ),
        lab=LabStart("--model", "hf", startup_timeout_s=120.0),
    ),
    ServerKind.VLLM: KindTraits(
        "vLLM",
        8000,
        needs_model=True,
        force_length={"ignore_eos": True},
        per_chunk_usage=True,
        metrics=True,
        lab=LabStart("--model", "hf", startup_timeout_s=600.0),
    ),
    ServerKind.SGLANG: KindTraits(
        "SGLang", 30000, needs_model=True, force_length={"ignore_eos": True}
    ),
    ServerKind.TRTLLM: KindTraits(
        "TensorRT-LLM",
        8000,
        needs_model=True,
        force_length={"ignore_eos": True},
        # Its /metrics is JSON iteration stats; the Prometheus counters (trtllm_*) are at
        # /prometheus/metrics, which felab_core.sizing.metrics_scrape does not read yet.
        metrics=False,
        note="trtllm-serve listens on 8000 like vLLM: run only one of them there",
    ),
    ServerKind.OPENAI: KindTraits("OpenAI-compatible", None),
}

#: The kinds `felab serve` can start on this machine's lab, by name.
LAB_KINDS = tuple(k for k, t in TRAITS.items() if t.lab is not None)


def kind_names(last: str = "", *, targets: bool = False, besides: tuple[str, ...] = ()) -> str:
    """The kinds' names for a message or a help text, read from this table, so a kind added
    here is named wherever they are listed (trtllm was missing from every list typed by hand).
    `last`: the word before the last name ("or"; "" joins all with commas); `targets`: only
    kinds with a default target (an address: not `openai`); `besides`: names said already."""
    kinds = [
        k.value
        for k in ServerKind
        if (not targets or TRAITS[k].port is not None) and k.value not in besides
    ]
    if not last or len(kinds) < 2:
        return ", ".join(kinds)
    return f"{', '.join(kinds[:-1])} {last} {kinds[-1]}"


def validate_server(server: str) -> str:
    """A server kind's name as felab stores it; Invalid names the kinds it knows."""
    try:
        return ServerKind(server.strip().lower()).value
    except ValueError:
        raise Invalid(
            f"{server!r} is not a server felab knows: use one of {kind_names()}"
        ) from None

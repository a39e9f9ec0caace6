"""Whether a vLLM log serves the model a command was given: its engine config names the model
(model='meta-llama/Llama-3.1-8B-Instruct'), and a memo written from Qwen2.5's config beside a
Llama server's log had put the Llama server's cache under Qwen's name without a word (sweep 24
M1).

Names are compared by family (Llama, Qwen, Mistral ...), the words model names and config
types share; a name that holds no family word (a local path, an alias, a fine-tune's own
name) is not judged, and neither is a pair that shares any family (DeepSeek-R1-Distill-Qwen
beside Qwen's config). Only two names that each name a family, and none in common, disagree.
"""

from __future__ import annotations

import re
from itertools import pairwise

from felab_core.sizing.shape import ModelShape
from felab_core.text import echo_of

#: Family words as model names, Hugging Face ids and config types spell them; a word of a
#: name that begins with one is of that family (gemma3_text, phimoe, qwen2, llama4).
FAMILIES = (
    "llama",
    "qwen",
    "qwq",
    "mistral",
    "mixtral",
    "ministral",
    "gemma",
    "phi",
    "deepseek",
    "gptoss",
    "falcon",
    "olmo",
    "olmoe",
    "granite",
    "cohere",
    "command",
    "internlm",
    "baichuan",
    "chatglm",
    "starcoder",
    "smollm",
    "exaone",
    "minicpm",
    "jamba",
    "dbrx",
    "nemotron",
    "stablelm",
)
#: Families one model's names mix: a Qwen QwQ, Mistral's Mixtral and Ministral, Cohere's Command.
_SAME = {"qwq": "qwen", "mixtral": "mistral", "ministral": "mistral", "command": "cohere"}
_SAME.update({"olmoe": "olmo"})


def families(text: str) -> set[str]:
    """The families a model name or config type names ('meta-llama/Llama-3.1-8B' -> llama)."""
    words = [w for w in re.split(r"[^a-z]+", text.lower()) if w]
    words += [a + b for a, b in pairwise(words)]  # gpt-oss, gpt_oss
    found = {f for f in FAMILIES for w in words if w.startswith(f)}
    return {_SAME.get(f, f) for f in found}


def log_model_problem(served: str | None, shape: ModelShape, log: str, given: str) -> str | None:
    """Why the model a vLLM log serves (`served`) is not `shape` (named by `given`, e.g.
    '--config cfg/qwen'); None when they agree or either names no family."""
    if not served:
        return None
    theirs = families(served)
    ours = families(" ".join(x for x in (shape.kind, shape.name) if x))
    if not theirs or not ours or theirs & ours:
        return None
    return (
        f"{log} is vLLM serving {echo_of(served)}, but {given} describes "
        f"{echo_of(shape.name)} ({', '.join(sorted(ours))}): its cache was sized for another "
        "model; give the log of the server that runs this model, or its cache with "
        "--kv-tokens (or --blocks) and --max-len"
    )

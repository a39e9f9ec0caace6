"""A model's shape, the few numbers the KV cache and the speed limit depend on.

Read from a Hugging Face `config.json` (plus its safetensors headers when they sit beside it),
from a GGUF file's metadata and tensor list (with the `gguf` package), or from a small table of
well-known models. Grouped-query attention, explicit head sizes, per-layer head counts,
DeepSeek-style latent caches and mixture-of-experts weights are all handled: each changes the
answer.

Long because it reads three sources (config.json with safetensors headers, GGUF metadata, a
table of well-known models) into one shape, with each architecture's quirks (sliding windows,
MLA, MoE) said where they are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from felab_core.files import MiB, NamedFileError, broken_link, read_named_text, refuse_special
from felab_core.json_keys import KeyTwice, once
from felab_core.sizing.errors import SizingError
from felab_core.sizing.expert_params import moe_params
from felab_core.sizing.gguf_hybrid import gguf_cache_layers, kv_zeros_mark_layers
from felab_core.sizing.hybrid_layers import cache_layers, cache_layers_note
from felab_core.sizing.model_names import NAME_ROUNDING, params_in_name, table_names
from felab_core.sizing.shape import ModelShape as ModelShape  # read from here too
from felab_core.sizing.shape_agreement import (
    Reading,
    check_experts,
    check_head_width,
    check_shard,
    check_tensor_count,
    check_weights_size,
    experts_held,
    hold_together,
    is_expert_tensor,
)
from felab_core.sizing.tensor_agreement import (
    ShapeKeys,
    check_feed_forward,
    check_heads,
    check_layers_and_width,
)
from felab_core.sizing.units import both_ways, decimal_size_text
from felab_core.text import holds_hidden, with_hidden_shown

if TYPE_CHECKING:
    from felab_core.sizing.gguf_header import GGUFHeader


# ---------------------------------------------------------------- Hugging Face config.json

_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_KV_HEAD_KEYS = ("num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
#: The trained context under the keys configs give it (GPT-2's n_positions, MPT's max_seq_len,
#: ChatGLM's seq_length, Baichuan's model_max_length); the first given is read.
_CONTEXT_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_sequence_length",
    "max_seq_len",
    "seq_length",
    "model_max_length",
)
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_EXPERT_USED_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_top_k")


def _first(cfg: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            return key, value
    return None


#: One figure under several keys (a converter's alias beside transformers' own): read from
#: the first alone, n_layer 2 beside num_hidden_layers 32 had been taken without a word.
_ALIASED = (_LAYER_KEYS, _HEAD_KEYS, _KV_HEAD_KEYS, _HIDDEN_KEYS, _EXPERT_KEYS, _EXPERT_USED_KEYS)
_ALIASED_HEAD = ("head_dim", "kv_channels")


def _aliases_agree(cfg: Mapping[str, Any], where: str, top: Mapping[str, Any] | None) -> None:
    """Every key giving one figure gives the same value; a multimodal config's top level and
    its text_config, when both give a figure, give the same one."""
    for keys in (*_ALIASED, _ALIASED_HEAD):
        given = [(k, cfg[k]) for k in keys if cfg.get(k) is not None]
        for key, value in given[1:]:
            _same_figure(given[0], (key, value), where, where)
        if top is not None and top is not cfg and given:
            other = _first(top, keys)
            if other is not None:
                _same_figure(given[0], other, where, f"{where} (its text_config)")


def _huge(value: Any) -> bool:
    return isinstance(value, int | float) and value > _CONTEXT_LIMIT


def _context_aliases(cfg: Mapping[str, Any]) -> list[str]:
    """A note for each context key that gives another length than the one read: Qwen's first
    config gives seq_length 8,192 (trained) beside max_position_embeddings 32,768 (its
    positions), so two lengths are said, not refused; either had been taken without a word."""
    given = [(k, cfg[k]) for k in _CONTEXT_KEYS if cfg.get(k) is not None]
    if given and given[-1][0] == "model_max_length" and _huge(given[-1][1]):
        given.pop()  # a tokenizer's "no limit", not a length
    return [
        f"the context length disagrees: {given[0][0]} {_shown_value(given[0][1])} (read), but "
        f"{key} {_shown_value(value)} in the same config; check the model card, and give the "
        "length the server runs with --max-len or --contexts"
        for key, value in given[1:]
        if value != given[0][1]
    ]


def _same_figure(a: tuple[str, Any], b: tuple[str, Any], a_from: str, b_from: str) -> None:
    hold_together(
        "one figure of the shape",
        Reading(a[1], f"{a[0]} {_shown_value(a[1])}", a_from),
        Reading(b[1], f"{b[0]} {_shown_value(b[1])}", b_from),
        room="two keys for one figure give one value",
        then="one of them is another model's or hand-edited: fix the config.json (or give it "
        "as downloaded)",
    )


#: Larger than any model's layer count, head count or width by far (the largest today have
#: ~100 layers, ~128 heads, widths of ~30,000): past it a config is broken, not big.
_SHAPE_LIMIT = 10_000_000

#: Wider than any attention head or latent cache by far: most heads hold 64 to 256 numbers,
#: DeepSeek's latent keys 576. A head of 9,999,999 had priced 9.54 GiB per token.
_HEAD_LIMIT = 4_096

#: Longer than any model's trained context by far: the longest today read 10,485,760 tokens
#: (Llama 4 Scout), past the shape limit that had refused it.
_CONTEXT_LIMIT = 100_000_000


#: A name that reads as one of felab's own lines ("error: your disk is full").
_SAID = re.compile(r"\s*(error|warning|note|waiting)\s*:", re.IGNORECASE)


def _shown_value(value: Any) -> str:
    """A file's value for an error: an array by its length (4,000 numbers had been echoed as
    a 23 kB line), anything else repr'd and cut to 40 characters (escape codes written out)."""
    if isinstance(value, list | tuple):
        if not value:
            return "an empty array"
        return f"an array of {len(value):,} item{'' if len(value) == 1 else 's'}"
    text = repr(value[:40] if isinstance(value, str) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _positive_int(value: Any, key: str, where: str, limit: int = _SHAPE_LIMIT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SizingError(
            f"{where}: {key} is {_shown_value(value)}, but it must be a whole number above zero; "
            "check that the file is the model's own config"
        )
    if value > limit:
        raise SizingError(
            f"{where}: {key} is {value:,}, far beyond any model (at most {limit:,}); "
            "check that the file is the model's own config"
        )
    return value


def _head_width(value: Any, key: str, where: str) -> int:
    """A head's (or latent cache's) width in numbers, held to what attention heads hold."""
    width = _positive_int(value, key, where)
    if width > _HEAD_LIMIT:
        raise SizingError(
            f"{where}: {key} is {width:,} numbers per head, wider than any model's attention "
            f"heads (most hold 64 to 256, DeepSeek's latent keys 576; felab takes at most "
            f"{_HEAD_LIMIT:,}); check that the file is the model's own config"
        )
    return width


def _expert_count(hit: tuple[str, Any] | None, where: str) -> int | None:
    """An expert count: 0 is a dense model's (Granite-4.0-H's dense configs ship
    num_local_experts 0), read as no mixture; a negative or a non-number is refused."""
    if hit is None:
        return None
    key, value = hit
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SizingError(
            f"{where}: {key} is {_shown_value(value)}, but it must be a whole number, 0 for a "
            "dense model; check that the file is the model's own config"
        )
    return 0 if value == 0 else _positive_int(value, key, where)


def _expert_counts(
    experts: tuple[str, Any] | None, used: tuple[str, Any] | None, where: str
) -> tuple[int | None, int | None]:
    """The experts and the experts a token uses, None for a dense model (no key, or 0 of 0, as
    llama.cpp reads it); 2 of 0, or 0 of 8, is refused (read as dense without a word before)."""
    n_experts, n_used = _expert_count(experts, where), _expert_count(used, where)
    _experts_fit(n_experts, n_used, where)
    if n_experts and n_used == 0 and used is not None:
        raise SizingError(
            f"{where}: {used[0]} is 0, but the model has {n_experts:,} experts: a token uses 1 "
            f"to {n_experts:,} of them (0 is a dense model's, beside 0 experts); check that the "
            "file is the model's own config"
        )
    return n_experts or None, n_used or None


def _experts_fit(n_experts: int | None, n_used: int | None, where: str) -> None:
    """A token uses some of the experts, never more than there are ("100 of 8" was printed)."""
    if n_experts is not None and n_used is not None and n_used > n_experts:
        raise SizingError(
            f"{where}: {n_used} experts used per token, but the model has {n_experts}; check "
            "that the file is the model's own config"
        )


def _refuse_weights_file(path: Path) -> None:
    """A model's weights given as its config: a GGUF had been read as text and told to "save the
    model's config.json as UTF-8" (sweep 23 s2 M3); a safetensors file fares the same."""
    if not path.is_file():  # a pipe is not opened here; read_named_text says what it is
        return
    try:
        with open(path, "rb") as fh:
            head = fh.read(10)
    except OSError:
        return  # read_named_text says why
    if head.startswith(b"GGUF"):
        raise SizingError(
            f"{path} is a GGUF model (it starts with GGUF), not a config.json: pass it with "
            "--gguf instead of --config"
        )
    if len(head) == 10 and head[8:10] == b'{"' and int.from_bytes(head[:8], "little") > 2:
        raise SizingError(
            f"{path} is a safetensors weights file, not a config.json: give the config.json "
            "beside it, or the folder that holds both, with --config"
        )


def _load_json(path: Path) -> dict[str, Any]:
    _refuse_weights_file(path)
    try:
        text = read_named_text(path, what="model's config.json", limit=16 * MiB)
    except NamedFileError as exc:
        raise SizingError(str(exc)) from None

    try:
        data = json.loads(text, object_pairs_hook=once)
    except KeyTwice as exc:  # json keeps the last: 64 layers read where 2 came first
        raise SizingError(
            f"{path} gives {with_hidden_shown(exc.key[:80])} twice: a config.json gives each "
            "key once; fix the file, or give the model's config as downloaded"
        ) from None
    except json.JSONDecodeError as exc:
        raise SizingError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); "
            "give the model's config.json as downloaded"
        ) from None
    except RecursionError:
        raise SizingError(f"{path} is nested too deeply to be a model's config.json") from None
    except ValueError:  # an integer of thousands of digits (Python reads at most 4,300)
        raise SizingError(
            f"{path} holds a number of thousands of digits: no model's config.json does"
        ) from None
    if not isinstance(data, dict):
        raise SizingError(f"{path} holds a JSON {type(data).__name__}, not a config object")
    return data


def uses_sliding_window(cfg: Mapping[str, Any]) -> bool:
    """Whether some layers keep only a window of recent tokens, as transformers reads a config:
    `layer_types` when it lists them, else a `sliding_window` size that `use_sliding_window`
    does not switch off (Qwen2.5 ships `"use_sliding_window": false` beside a window size)."""
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        return any("sliding" in str(t) for t in types)
    if cfg.get("use_sliding_window") is False:
        return False
    return bool(cfg.get("sliding_window"))


def from_hf_config(source: str | Path | Mapping[str, Any], name: str | None = None) -> ModelShape:
    """Read a model's shape from a Hugging Face config.json (a file, its folder, or a dict).

    When the folder also holds `*.safetensors`, their headers give the exact weight bytes (and, for
    mixture-of-experts models, the bytes one token actually reads).
    """
    folder: Path | None = None
    if isinstance(source, Mapping):
        cfg: Mapping[str, Any] = source
        where = "config"
    else:
        path = Path(source)
        if path.is_dir():
            folder = path
            path = path / "config.json"
        elif path.exists():
            folder = path.parent
        if (link := broken_link(path)) is not None:
            raise SizingError(f"{path} {link}")
        if not path.exists():
            raise SizingError(
                f"{path} does not exist: give the path of a model's config.json or of the folder "
                "that holds it"
            )
        cfg = _load_json(path)
        where = str(path)

    top = cfg
    text_cfg = cfg.get("text_config")
    if isinstance(text_cfg, Mapping) and _first(cfg, _LAYER_KEYS) is None:
        cfg = text_cfg  # multimodal models keep the language model's shape one level down
    if isinstance(text_cfg, Mapping) and cfg is top:
        _aliases_agree(text_cfg, str(where), None)
        _aliases_agree(cfg, str(where), text_cfg)  # the top level read, its text_config beside
    else:
        _aliases_agree(cfg, str(where), None)

    missing = [
        label
        for label, keys in (("num_hidden_layers", _LAYER_KEYS), ("num_attention_heads", _HEAD_KEYS))
        if _first(cfg, keys) is None
    ]
    hidden_hit = _first(cfg, _HIDDEN_KEYS)
    if cfg.get("head_dim") is None and cfg.get("kv_channels") is None and hidden_hit is None:
        missing.append("head_dim (or hidden_size)")
    if missing:
        raise SizingError(
            f"{where} lacks {', '.join(missing)}, which the KV cache size depends on; give the "
            "model's own config.json (not a tokenizer or generation config), or name the model "
            "with --model"
        )

    layers_key, layers = _first(cfg, _LAYER_KEYS) or ("", 0)
    heads_key, heads = _first(cfg, _HEAD_KEYS) or ("", 0)
    n_layers = _positive_int(layers, layers_key, where)
    n_heads = _positive_int(heads, heads_key, where)
    notes: list[str] = []

    kv_hit = _first(cfg, _KV_HEAD_KEYS)
    if kv_hit is not None:
        n_kv = _positive_int(kv_hit[1], kv_hit[0], where)
    elif cfg.get("multi_query") is True:
        n_kv = 1
    else:
        n_kv = n_heads
        notes.append(
            "the config names no KV head count, so every query head is taken to keep its own "
            "keys and values (no grouped-query attention)"
        )
    if n_kv > n_heads:
        raise SizingError(
            f"{where}: {n_kv} KV heads but only {n_heads} query heads; a model never has more "
            "KV heads than query heads, so the config is damaged or not a decoder's"
        )
    _check_groups(n_heads, n_kv, where)

    hidden = _positive_int(hidden_hit[1], hidden_hit[0], where) if hidden_hit else None
    head_key = "head_dim" if cfg.get("head_dim") is not None else "kv_channels"
    if cfg.get(head_key) is not None:
        head_dim = _head_width(cfg[head_key], head_key, where)
        if cfg.get("kv_lora_rank") is None:  # latent (MLA) heads are not the width's share
            check_head_width(
                n_heads,
                head_dim,
                hidden,
                where,
                head_key=f"{heads_key} x {head_key}",
                hidden_key=hidden_hit[0] if hidden_hit else "",
            )
    else:
        assert hidden is not None
        if hidden % n_heads:
            raise SizingError(
                f"{where}: hidden_size {hidden} does not split evenly over {n_heads} heads and "
                "there is no head_dim; add head_dim from the model card"
            )
        head_dim = _head_width(
            hidden // n_heads, f"hidden_size {hidden:,} over {n_heads} heads", where
        )

    latent: int | None = None
    if cfg.get("kv_lora_rank") is not None:
        rank = _head_width(cfg["kv_lora_rank"], "kv_lora_rank", where)
        rope = cfg.get("qk_rope_head_dim")
        rope = 0 if rope in (None, 0) else _head_width(rope, "qk_rope_head_dim", where)
        latent = rank + rope
        notes.append(
            "latent attention (MLA): the cache keeps one compressed vector of "
            f"{rank} + {rope} numbers per layer, as vLLM and llama.cpp store it"
        )

    ctx_hit = _first(cfg, _CONTEXT_KEYS)
    if ctx_hit and ctx_hit[0] == "model_max_length" and _huge(ctx_hit[1]):
        ctx_hit = None  # transformers' "no limit" (1e30) copied from a tokenizer config
    notes.extend(_context_aliases(cfg))
    experts_hit = _first(cfg, _EXPERT_KEYS)
    used_hit = _first(cfg, _EXPERT_USED_KEYS)
    n_experts, n_used = _expert_counts(experts_hit, used_hit, where)  # 0 experts: dense
    if n_experts and n_experts > 1 and n_used is None:  # c C6: read as dense without a word
        notes.append(
            f"{experts_hit[0] if experts_hit else 'experts'} says {n_experts} experts, but no "
            f"key says how many a token uses ({', '.join(_EXPERT_USED_KEYS)}): the weights a "
            "token reads are taken as all of them, an upper bound"
        )
    if uses_sliding_window(cfg):
        notes.append(
            "some layers use a sliding window and keep fewer tokens; figures here are the "
            "full-length upper bound"
        )
    kept = cache_layers(cfg, n_layers)
    if kept is not None:
        notes.append(cache_layers_note(kept, n_layers))
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or top.get("torch_dtype")
    architectures = top.get("architectures")
    architecture = (
        architectures[0]
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str)
        else None
    )  # a number or a mapping there had been indexed (exit 70), a string cut to its first letter
    folder_name = folder.name if folder is not None else ""  # "" for a file named relatively
    model_name = name or top.get("_name_or_path") or folder_name or architecture or "model"
    if (
        not isinstance(model_name, str)
        or holds_hidden(model_name)
        or len(model_name) > 300
        or _SAID.match(model_name)
    ):
        # the file's words reach the terminal and a memo: an escape code or a forged
        # "error:" line is no name; nor a folder's byte that is not UTF-8 (shown as '?')
        model_name = with_hidden_shown(folder_name) or "model"
    shape = ModelShape(
        name=str(model_name),
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim_k=head_dim,
        head_dim_v=head_dim,
        source=f"config.json ({with_hidden_shown(str(where))})",  # a byte not UTF-8: ?
        latent_cache_dim=latent,
        hidden_size=hidden,
        context_length=(
            _positive_int(ctx_hit[1], ctx_hit[0], where, _CONTEXT_LIMIT) if ctx_hit else None
        ),
        n_experts=n_experts,
        n_experts_used=n_used,
        weights_dtype=str(dtype) if dtype else None,
        notes=tuple(notes),
        attention_layers=kept,
        kind=" ".join(
            k
            for k in (cfg.get("model_type"), top.get("model_type"), architecture)
            if isinstance(k, str)
        )
        or None,
    )
    counted = moe_params(cfg, shape)  # the active share of a file given beside the config
    if counted is not None:
        shape = replace(shape, params_total=counted[0], params_active=counted[1])
    if folder is not None:
        keys = ShapeKeys(
            layers=layers_key,
            hidden=hidden_hit[0] if hidden_hit else "hidden_size",
            heads=heads_key,
            kv_heads=kv_hit[0] if kv_hit else heads_key,
            head_dim=head_key if cfg.get(head_key) is not None else "head size",
            where=with_hidden_shown(where),
        )
        shape = _with_safetensors_weights(
            shape, folder, experts_hit[0] if experts_hit else "", keys, cfg
        )
        check_weights_size(shape)
    return shape


def _with_safetensors_weights(
    shape: ModelShape, folder: Path, experts_key: str, keys: ShapeKeys, cfg: Mapping[str, Any]
) -> ModelShape:
    from felab_core.sizing.safetensors_header import tensor_table
    from felab_core.sizing.weight_files import safetensors_files

    chosen = safetensors_files(folder)  # one copy of the weights, all of its shards
    files = list(chosen.files)
    if not files:
        return shape
    if chosen.note:
        shape = replace(shape, notes=(*shape.notes, chosen.note), weights_left_out=chosen.note)
    if chosen.unreadable:
        return replace(shape, weights_unreadable=chosen.unreadable)
    table = tensor_table(files)
    total = sum(b for b, _ in table.values())
    expert = sum(b for n, (b, _) in table.items() if is_expert_tensor(n, gguf=False))
    active = _active_bytes(total, expert, shape)
    listed_in = (
        with_hidden_shown(str(files[0]))
        if len(files) == 1
        else f"the {len(files):,} .safetensors files in {with_hidden_shown(str(folder))}"
    )
    where = keys.where
    shapes = [(n, dims) for n, (_, dims) in table.items()]
    held = experts_held(shapes, gguf=False, said=shape.n_experts)
    check_experts(
        shape.n_experts,
        experts_key,
        where,
        held,
        f"the tensors listed in {listed_in}",
        tensors_held=bool(total) and not expert,
    )
    nextn = cfg.get("num_nextn_predict_layers")
    check_layers_and_width(
        shape,
        shapes,
        keys,
        f"the tensors listed in {listed_in}",
        gguf=False,
        extra_layers=nextn if type(nextn) is int and 0 <= nextn <= 16 else 0,
        quantized=cfg.get("quantization") is not None or cfg.get("quantization_config") is not None,
    )
    check_heads(shape, shapes, keys, f"the tensors listed in {listed_in}", gguf=False)
    inter = cfg.get("intermediate_size")
    check_feed_forward(
        "intermediate_size",
        inter if type(inter) is int and inter > 0 else None,
        where,
        shapes,
        f"the tensors listed in {listed_in}",
    )
    return replace(
        shape,
        weights_bytes=total,
        active_weights_bytes=active,
        weights_from=f"the tensors listed in {listed_in}",
    )


def _active_bytes(total: int, expert: int, shape: ModelShape) -> Fraction:
    """Weights one token reads: everything but the experts, plus the used share of the experts."""
    if shape.is_moe and expert:
        assert shape.n_experts and shape.n_experts_used
        return Fraction(total - expert) + Fraction(expert * shape.n_experts_used, shape.n_experts)
    return Fraction(total)


# ---------------------------------------------------------------- GGUF


def _per_layer(value: Any, key: str, where: str) -> tuple[int | None, tuple[int, ...] | None]:
    """GGUF stores some counts once or once per layer; give (single value, per-layer tuple).
    A count that is not a whole number (4096.7) is refused, not rounded down; in a per-layer
    list a layer may have none (0), never fewer (-2 had subtracted cache)."""
    values = value if isinstance(value, list) else [] if value is None else [value]
    if isinstance(value, list) and not value:  # the key is there: "lacks it" misled
        raise SizingError(
            f"{where}: {key} is an empty array, not a count of heads; check that the file is a "
            "model's GGUF"
        )
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise SizingError(
                f"{where}: {key} holds {_shown_value(v)}, not a whole number; check that the "
                "file is a model's GGUF"
            )
        if isinstance(value, list) and not 0 <= v <= _SHAPE_LIMIT:
            raise SizingError(
                f"{where}: {key} holds {v:,} for a layer, and a layer has 0 to "
                f"{_SHAPE_LIMIT:,}; check that the file is a model's GGUF"
            )
    if isinstance(value, list):
        ints = tuple(int(v) for v in value)
        if ints and all(v == ints[0] for v in ints):
            return ints[0], None
        return (max(ints) if ints else None), ints
    if value is None:
        return None, None
    return int(value), None


def from_gguf(path: str | Path) -> ModelShape:
    """Read a model's shape and exact weight bytes from a GGUF file's metadata and tensor list."""
    gguf_path = Path(path)
    try:  # mapped, not read whole: any size is fine, but a device or a pipe is not a model
        present = refuse_special(gguf_path, what=".gguf model")
    except NamedFileError as exc:
        raise SizingError(str(exc)) from None
    if present is None:
        raise SizingError(f"{gguf_path} does not exist: give the path of a .gguf model")
    try:
        with gguf_path.open("rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise SizingError(f"cannot read {gguf_path}: {exc.strerror or exc}") from None
    if head[:4] != b"GGUF" and _is_lfs_pointer(gguf_path):
        raise SizingError(
            f"{gguf_path} is a Git LFS pointer, not the model (git clone without git-lfs leaves "
            "these): run `git lfs pull` in its folder, or download the .gguf file itself"
        )
    if head[:4] != b"GGUF":  # a JSON, safetensors or text file: say so, not the reader's error
        raise SizingError(
            f"{gguf_path} is not a GGUF file (it does not start with GGUF), so felab cannot read "
            "it as a GGUF model: give the .gguf file itself, or the model's Hugging Face "
            "config.json with --config"
        )
    from felab_core.sizing.gguf_header import (
        SUPPORTED_VERSIONS,
        DuplicateKey,
        GGUFHeaderError,
        read_header,
    )

    version = int.from_bytes(head[4:8], "little") if len(head) == 8 else None
    if version is not None and version & 0xFFFF == 0:  # written big-endian
        version = int.from_bytes(head[4:8], "big")
    if version is not None and version not in SUPPORTED_VERSIONS:
        known = " and ".join(str(v) for v in SUPPORTED_VERSIONS)
        raise SizingError(
            f"{gguf_path} is GGUF version {version}, and felab reads versions {known}: give "
            "the model's Hugging Face config.json with --config instead"
        )
    try:
        header = read_header(gguf_path)
    except DuplicateKey as exc:
        raise SizingError(
            f"{gguf_path} names the metadata key {with_hidden_shown(exc.key)} twice: the file "
            "was written wrongly (a damaged download would be cut short, not repeat a key); "
            "convert the model again, or give its Hugging Face config.json with --config"
        ) from None
    except GGUFHeaderError as exc:
        advice = (
            "download the .gguf file again (a partial copy is the usual cause)"
            if exc.cut_short
            else "the file was written wrongly or by a newer converter, so downloading it again "
            "will not help: convert the model again, or give its Hugging Face config.json "
            "with --config"
        )
        raise SizingError(
            f"cannot read {gguf_path} as a GGUF model: it starts with GGUF, but "
            f"{with_hidden_shown(str(exc))}; {advice}"
        ) from None
    except OSError as exc:
        raise SizingError(f"cannot read {gguf_path}: {exc.strerror or exc}") from None

    def field(name: str) -> Any:
        try:
            return header.value(name)
        except GGUFHeaderError as exc:
            raise SizingError(
                f"{gguf_path}: {with_hidden_shown(str(exc))}; the file is damaged or not a model"
            ) from None

    split = field("split.count")  # gguf-split: shard 1 holds the shape, all hold tensors
    shards = [gguf_path]
    if type(split) is int and split > 1:
        if field("split.no") not in (0, None):
            raise SizingError(
                f"{gguf_path} is shard {int(field('split.no')) + 1:,} of a GGUF split into "
                f"{split:,} files: give the first shard (NAME-00001-of-{split:05d}.gguf), and "
                "felab reads the rest beside it"
            )
        from felab_core.sizing.weight_files import gguf_shards

        shards = gguf_shards(gguf_path, split)
    else:
        from felab_core.sizing.weight_files import refuse_unsplit_shard_name

        refuse_unsplit_shard_name(gguf_path, split)
    arch = field("general.architecture")
    if arch is None:
        raise SizingError(
            f"{gguf_path} has no general.architecture key, so its shape cannot be read; "
            "is it a model file (not a LoRA adapter or a vocabulary-only file)?"
        )
    if not isinstance(arch, str) or not arch:  # the key is there: no adapter to look for
        raise SizingError(
            f"{gguf_path}: general.architecture is {_shown_value(arch)}, not an architecture's "
            "name (llama, qwen2, ...): the file is damaged or was written wrongly; convert the "
            "model again, or give its Hugging Face config.json with --config"
        )
    if holds_hidden(arch) or len(arch) > 64:  # every message below names it
        raise SizingError(
            f"{gguf_path}: general.architecture is not an architecture's name (control or "
            "invisible characters, or over 64 characters): the file is damaged or not a model"
        )

    def key(suffix: str) -> Any:
        return field(f"{arch}.{suffix}")

    layers = key("block_count")
    where = str(gguf_path)
    heads, heads_by_layer = _per_layer(
        key("attention.head_count"), f"{arch}.attention.head_count", where
    )
    kv, kv_by_layer = _per_layer(
        key("attention.head_count_kv"), f"{arch}.attention.head_count_kv", where
    )
    hidden = key("embedding_length")
    if hidden is not None:
        hidden = _positive_int(hidden, f"{arch}.embedding_length", where)
    missing = [
        f"{arch}.{s}"
        for s, v in (("block_count", layers), ("attention.head_count", heads))
        if v is None
    ]
    if missing:
        raise SizingError(
            f"{gguf_path} lacks {', '.join(missing)}; the file may be an adapter or written by a "
            "converter that left the shape out"
        )
    n_layers = _positive_int(layers, f"{arch}.block_count", str(gguf_path))
    for suffix in ("attention.head_count", "attention.head_count_kv"):
        listed = key(suffix)  # a list of even counts is read as one: its length is checked here
        if isinstance(listed, list) and len(listed) != n_layers:
            raise SizingError(
                f"{gguf_path}: {arch}.{suffix} lists {len(listed):,} layers' counts for "
                f"{n_layers:,} layers; check that the file is a model's GGUF"
            )
    assert heads is not None
    if heads_by_layer is not None:
        heads = max(heads_by_layer)
    if kv is None:
        kv = heads
    heads = _positive_int(heads, f"{arch}.attention.head_count", str(gguf_path))
    if kv_by_layer is None:  # a per-layer list may hold zeros (layers without attention)
        kv = _positive_int(kv, f"{arch}.attention.head_count_kv", str(gguf_path))
        for layer, layer_heads in enumerate(heads_by_layer or ()):
            if layer_heads < kv:  # [2, 0] beside 2 KV heads: a layer caching for no query head
                raise SizingError(
                    f"{gguf_path}: layer {layer} has {layer_heads} query heads but {kv} KV heads "
                    "(each KV head serves one or more query heads); check that the file is a "
                    "model's GGUF"
                )
            _check_groups(layer_heads, int(kv), f"{gguf_path} (layer {layer})")
    notes: list[str] = []
    if kv_by_layer is not None:
        if not kv_zeros_mark_layers(kv_by_layer):  # else: "N of M layers keep a KV cache"
            notes.append(
                "the number of KV heads differs from layer to layer; each layer is counted"
            )
        if all(v == 0 for v in kv_by_layer):
            raise SizingError(f"{gguf_path}: every layer has zero KV heads")
        for layer, layer_kv in enumerate(kv_by_layer):
            layer_heads = heads_by_layer[layer] if heads_by_layer else int(heads)
            if layer_kv > layer_heads:  # 1,000 KV heads beside 8 query heads had been priced
                raise SizingError(
                    f"{gguf_path}: layer {layer} has {layer_kv:,} KV heads but {layer_heads} "
                    "query heads (each KV head serves one or more query heads); check that the "
                    "file is a model's GGUF"
                )
            if layer_kv:
                _check_groups(layer_heads, layer_kv, f"{gguf_path} (layer {layer})")
    elif kv:
        _check_groups(int(heads), int(kv), str(gguf_path))
    key_len = key("attention.key_length")
    value_len = key("attention.value_length")
    if key_len is not None:
        key_len = _head_width(key_len, f"{arch}.attention.key_length", str(gguf_path))
    if value_len is not None:
        value_len = _head_width(value_len, f"{arch}.attention.value_length", str(gguf_path))
    if key_len is None:
        if hidden is None or int(heads) == 0:
            raise SizingError(
                f"{gguf_path} has neither {arch}.attention.key_length nor "
                f"{arch}.embedding_length, so the head size is unknown"
            )
        if int(hidden) % int(heads):  # 3 over 8 heads had given a 0-byte cache
            raise SizingError(
                f"{gguf_path}: {arch}.embedding_length {hidden} does not split evenly over "
                f"{heads} heads and there is no {arch}.attention.key_length; check that the file "
                "is a model's GGUF"
            )
        key_len = _head_width(
            int(hidden) // int(heads),
            f"{arch}.embedding_length {hidden:,} over {heads} heads",
            where,
        )
    if value_len is None:
        value_len = key_len

    latent = None
    kv_rank = key("attention.kv_lora_rank")
    if kv_rank:
        kv_rank = _head_width(kv_rank, f"{arch}.attention.kv_lora_rank", str(gguf_path))
        rope = key("rope.dimension_count") or 0
        if rope:
            rope = _head_width(rope, f"{arch}.rope.dimension_count", str(gguf_path))
        latent = kv_rank + rope
        notes.append(
            f"latent attention (MLA): llama.cpp caches {kv_rank} + {rope} numbers per layer"
        )
    if key_len is not None and key("attention.key_length") is not None and latent is None:
        check_head_width(
            int(heads),
            int(key_len),
            int(hidden) if hidden is not None else None,
            with_hidden_shown(where),
            head_key=f"{arch}.attention.head_count x {arch}.attention.key_length",
            hidden_key=f"{arch}.embedding_length",
        )
    if key("attention.sliding_window"):
        notes.append(
            "some layers use a sliding window and keep fewer tokens; figures here are the "
            "full-length upper bound"
        )
    kept = gguf_cache_layers(key, arch, n_layers, kv_by_layer, where)
    if kept is not None:
        notes.append(cache_layers_note(kept, n_layers))

    experts_hit, used_hit = (
        (f"{arch}.{k}", key(k)) if key(k) is not None else None
        for k in ("expert_count", "expert_used_count")
    )  # 0 (or 0 of 0): not a mixture, as llama.cpp reads it
    n_experts, n_used = _expert_counts(experts_hit, used_hit, str(gguf_path))
    total = 0
    expert = 0
    every_tensor: list[Any] = []
    seen: dict[str, Path] = {}
    shard_header = header
    for index, shard in enumerate(shards):
        if index:  # another model's shard had been added to the first
            shard_header = _shard_header(shard)
            check_shard(
                header,
                gguf_path,
                shard_header,
                shard,
                index,
                arch=arch,
                n_layers=n_layers,
                hidden=int(hidden) if hidden is not None else None,
            )
        for tensor in shard_header.tensors:
            if tensor.name in seen:  # llama.cpp refuses it too: "tensor ... is duplicated"
                raise SizingError(
                    f"{with_hidden_shown(str(shard))} lists tensor "
                    f"{with_hidden_shown(tensor.name[:60])}, and so does "
                    f"{with_hidden_shown(str(seen[tensor.name]))}: a model's shards hold each "
                    "tensor once (a copy of another download beside these?); put the model's own "
                    "shards together, downloaded from one place"
                )
            seen[tensor.name] = shard
            every_tensor.append(tensor)
            size = int(tensor.n_bytes)
            total += size
            if is_expert_tensor(tensor.name, gguf=True):
                expert += size
    if len(shards) > 1:
        check_tensor_count(header, gguf_path, len(every_tensor), len(shards))
    check_experts(
        n_experts,
        f"{arch}.expert_count",
        f"the metadata of {with_hidden_shown(where)}",
        experts_held(
            ((t.name, t.dims) for t in every_tensor),
            gguf=True,
            said=int(n_experts) if n_experts else None,
        ),
        f"the tensors listed in {with_hidden_shown(where)}"
        + (f" and the {len(shards) - 1:,} shards beside it" if len(shards) > 1 else ""),
        tensors_held=bool(total) and not expert,
    )
    if not total:  # shape keys but no weights: a vocabulary-only file, or a header copied alone
        notes.append(
            "the file lists no tensors (or only empty ones), so its weights' size is unknown (a "
            "vocabulary-only file, or a header without weights?): give the model's size with "
            "--model-bytes"
        )
    try:
        name = field("general.name") or gguf_path.stem
    except SizingError:  # a name that is not UTF-8 text labels nothing: the file's name does
        name = gguf_path.stem
    if not isinstance(name, str) or holds_hidden(name) or len(name) > 300:
        name = gguf_path.stem  # a number is no name; the file's own words reach the terminal
    context = key("context_length")
    if context is not None:  # a string "lots" crashed; -1 was shown as the trained context
        context = _positive_int(context, f"{arch}.context_length", str(gguf_path), _CONTEXT_LIMIT)
    file_type = field("general.file_type")
    shape = ModelShape(
        name=str(name),
        n_layers=n_layers,
        n_heads=int(heads),
        n_kv_heads=int(kv),
        head_dim_k=int(key_len),
        head_dim_v=int(value_len),
        source=f"GGUF ({with_hidden_shown(str(gguf_path))})",
        kv_heads_by_layer=kv_by_layer,
        latent_cache_dim=latent,
        hidden_size=int(hidden) if hidden is not None else None,
        context_length=int(context) if context is not None else None,
        n_experts=int(n_experts) if n_experts else None,
        n_experts_used=int(n_used) if n_used else None,
        weights_bytes=total or None,
        weights_dtype=_gguf_file_type_name(file_type),
        notes=tuple(notes),
        attention_layers=kept,
        kind=str(arch),
        weights_from=f"the tensors listed in {with_hidden_shown(str(gguf_path))}"
        + (f" and the {len(shards) - 1:,} shards beside it" if len(shards) > 1 else ""),
    )
    active = _active_bytes(total, expert, shape) if total else None
    shape = replace(shape, active_weights_bytes=active)
    shapes = [(t.name, t.dims) for t in every_tensor]
    keys = ShapeKeys(
        layers=f"{arch}.block_count",
        hidden=f"{arch}.embedding_length",
        heads=f"{arch}.attention.head_count",
        kv_heads=f"{arch}.attention.head_count_kv",
        head_dim=f"{arch}.attention.key_length"
        if key("attention.key_length") is not None
        else "head size",
        where=f"the metadata of {with_hidden_shown(where)}",
    )
    tensors_from = shape.weights_from or with_hidden_shown(where)
    nextn = key("nextn_predict_layers")  # GLM's MTP blocks: counted, a converter may drop them
    check_layers_and_width(
        shape,
        shapes,
        keys,
        tensors_from,
        gguf=True,
        missing_layers=nextn if type(nextn) is int and 0 <= nextn <= 16 else 0,
    )
    check_heads(shape, shapes, keys, tensors_from, gguf=True, check_queries=heads_by_layer is None)
    check_weights_size(shape)
    return shape


def _is_lfs_pointer(path: Path) -> bool:
    from felab_core.sizing.weight_files import LFS_POINTER

    try:
        with path.open("rb") as fh:
            return fh.read(len(LFS_POINTER)) == LFS_POINTER
    except OSError:
        return False


def _gguf_file_type_name(file_type: Any) -> str | None:
    if isinstance(file_type, bool) or not isinstance(file_type, int):  # [1, 2] or inf crashed
        return None
    try:
        from gguf import LlamaFileType

        return str(LlamaFileType(int(file_type)).name).removeprefix("MOSTLY_").lower()
    except (ValueError, ImportError):
        return str(file_type)


def _check_groups(n_heads: int, n_kv: int, where: str) -> None:
    """Grouped-query attention shares each KV head among the same number of query heads, so
    the query heads are a whole multiple of the KV heads; anything else is a damaged shape."""
    if n_kv and n_heads % n_kv:
        raise SizingError(
            f"{where}: {n_heads} query heads cannot share {n_kv} KV heads evenly (grouped-query "
            "attention gives each KV head the same number of query heads); check "
            "num_key_value_heads against num_attention_heads"
        )


def _shard_header(path: Path) -> GGUFHeader:
    """The header of one further shard of a split GGUF."""
    from felab_core.sizing.gguf_header import GGUFHeaderError, read_header

    try:
        refuse_special(path, what=".gguf shard")  # a FIFO would be waited on for good
        return read_header(path)
    except NamedFileError as exc:
        raise SizingError(str(exc)) from None
    except (GGUFHeaderError, OSError) as exc:
        raise SizingError(
            f"cannot read {with_hidden_shown(str(path))}, a shard of a split GGUF: "
            f"{with_hidden_shown(str(exc))}; download it again"
        ) from None


def gguf_file_bytes(path: str | Path) -> int:
    """The file's size on disk, all shards of a split GGUF together: what the course divides
    the bandwidth by (4.9 GB). The first of three shards had been taken for the model."""
    from felab_core.sizing.weight_files import gguf_shards

    try:
        return sum(shard.stat().st_size for shard in gguf_shards(Path(path)))
    except OSError as exc:
        raise SizingError(f"cannot read {path}: {exc.strerror or exc}") from None


# ---------------------------------------------------------------- well-known models


@dataclass(frozen=True)
class KnownModel:
    """One row of the table: a model's published shape and where it was read."""

    key: str
    shape: ModelShape
    aliases: tuple[str, ...] = ()


def _known(
    key: str,
    name: str,
    layers: int,
    heads: int,
    kv: int,
    head_dim: int,
    hidden: int,
    context: int,
    params: int,
    source: str,
    *,
    active: int | None = None,
    experts: int | None = None,
    used: int | None = None,
    aliases: tuple[str, ...] = (),
    notes: tuple[str, ...] = (),
) -> KnownModel:
    return KnownModel(
        key=key,
        aliases=aliases,
        shape=ModelShape(
            name=name,
            n_layers=layers,
            n_heads=heads,
            n_kv_heads=kv,
            head_dim_k=head_dim,
            head_dim_v=head_dim,
            hidden_size=hidden,
            context_length=context,
            params_total=params,
            params_active=active if active is not None else params,
            n_experts=experts,
            n_experts_used=used,
            weights_dtype="bf16",
            source=f"felab's table of well-known models ({source})",
            notes=notes,
        ),
    )


_HF = "the model's config.json on Hugging Face"
_SWA = ("half of the layers use a sliding window and keep fewer tokens; this is the upper bound",)

KNOWN_MODELS: tuple[KnownModel, ...] = (
    _known(
        "llama-3.1-8b",
        "Llama 3.1 8B",
        layers=32,
        heads=32,
        kv=8,
        head_dim=128,
        hidden=4096,
        context=131072,
        params=8_030_261_248,
        source=f"{_HF}, meta-llama/Llama-3.1-8B-Instruct",
        aliases=("llama3.1:8b", "llama-3.1-8b-instruct", "llama3.1-8b", "llama-3-8b"),
    ),
    _known(
        "llama-3.1-70b",
        "Llama 3.1 70B",
        layers=80,
        heads=64,
        kv=8,
        head_dim=128,
        hidden=8192,
        context=131072,
        params=70_553_706_496,
        source=f"{_HF}, meta-llama/Llama-3.1-70B-Instruct",
        aliases=("llama3.1:70b", "llama-3.3-70b", "llama3.3:70b", "llama-3.1-70b-instruct"),
    ),
    _known(
        "llama-3.2-1b",
        "Llama 3.2 1B",
        layers=16,
        heads=32,
        kv=8,
        head_dim=64,
        hidden=2048,
        context=131072,
        params=1_235_814_400,
        source=f"{_HF}, meta-llama/Llama-3.2-1B-Instruct",
        aliases=("llama3.2:1b",),
    ),
    _known(
        "llama-3.2-3b",
        "Llama 3.2 3B",
        layers=28,
        heads=24,
        kv=8,
        head_dim=128,
        hidden=3072,
        context=131072,
        params=3_212_749_824,
        source=f"{_HF}, meta-llama/Llama-3.2-3B-Instruct",
        aliases=("llama3.2:3b", "llama3.2"),
    ),
    _known(
        "mistral-7b",
        "Mistral 7B v0.3",
        layers=32,
        heads=32,
        kv=8,
        head_dim=128,
        hidden=4096,
        context=32768,
        params=7_248_023_552,
        source=f"{_HF}, mistralai/Mistral-7B-Instruct-v0.3",
        aliases=("mistral:7b", "mistral"),
    ),
    _known(
        "mixtral-8x7b",
        "Mixtral 8x7B",
        layers=32,
        heads=32,
        kv=8,
        head_dim=128,
        hidden=4096,
        context=32768,
        params=46_702_792_704,
        source=f"{_HF}, mistralai/Mixtral-8x7B-Instruct-v0.1; 12.9B active per the model card",
        active=12_900_000_000,
        experts=8,
        used=2,
        aliases=("mixtral:8x7b", "mixtral"),
    ),
    _known(
        "qwen2.5-7b",
        "Qwen2.5 7B",
        layers=28,
        heads=28,
        kv=4,
        head_dim=128,
        hidden=3584,
        context=32768,
        params=7_615_616_512,
        source=f"{_HF}, Qwen/Qwen2.5-7B-Instruct",
        aliases=("qwen2.5:7b",),
    ),
    _known(
        "qwen3-8b",
        "Qwen3 8B",
        layers=36,
        heads=32,
        kv=8,
        head_dim=128,
        hidden=4096,
        context=40960,
        params=8_190_735_360,
        source=f"{_HF}, Qwen/Qwen3-8B",
        aliases=("qwen3:8b",),
    ),
    _known(
        "qwen3-30b-a3b",
        "Qwen3 30B-A3B",
        layers=48,
        heads=32,
        kv=4,
        head_dim=128,
        hidden=2048,
        context=40960,
        params=30_532_122_624,
        source=f"{_HF}, Qwen/Qwen3-30B-A3B; 3.3B active per the model card",
        active=3_300_000_000,
        experts=128,
        used=8,
        aliases=("qwen3:30b", "qwen3:30b-a3b"),
    ),
    _known(
        "gemma-2-9b",
        "Gemma 2 9B",
        layers=42,
        heads=16,
        kv=8,
        head_dim=256,
        hidden=3584,
        context=8192,
        params=9_241_705_984,
        source=f"{_HF}, google/gemma-2-9b-it",
        aliases=("gemma2:9b",),
        notes=_SWA,
    ),
    _known(
        "gpt-oss-20b",
        "gpt-oss-20b",
        layers=24,
        heads=64,
        kv=8,
        head_dim=64,
        hidden=2880,
        context=131072,
        params=20_914_757_184,
        source=f"{_HF}, openai/gpt-oss-20b; 3.6B active per the model card",
        active=3_600_000_000,
        experts=32,
        used=4,
        aliases=("gpt-oss:20b",),
        notes=_SWA,
    ),
    _known(
        "gpt-oss-120b",
        "gpt-oss-120b",
        layers=36,
        heads=64,
        kv=8,
        head_dim=64,
        hidden=2880,
        context=131072,
        params=116_829_156_672,
        source=f"{_HF}, openai/gpt-oss-120b; 5.1B active per the model card",
        active=5_100_000_000,
        experts=128,
        used=4,
        aliases=("gpt-oss:120b",),
        notes=_SWA,
    ),
)


def _normalise(name: str) -> str:
    return re.sub(r"[\s_\-./:]+", "", name.lower()).removesuffix("instruct")


def known_model(name: str) -> ModelShape:
    """Look a model up in the table by key, display name or Ollama-style tag."""
    wanted = _normalise(name)
    for row in KNOWN_MODELS:
        names = (row.key, row.shape.name, *row.aliases)
        if any(_normalise(n) == wanted for n in names):
            return row.shape
    choices = ", ".join(row.key for row in KNOWN_MODELS)
    raise SizingError(
        f"{name!r} is not in felab's table of well-known models ({choices}); give the model's "
        "config.json with --config or its GGUF file with --gguf instead"
    )


#: Bits per weight a model file can hold: from llama.cpp's 1.5-bit quants (a little under, for
#: the rounding of a typed size) to 32-bit floats with the embeddings and metadata a file adds.
_FILE_BITS_LOW, _FILE_BITS_HIGH = Fraction(14, 10), Fraction(34)


def file_size_problem(name: str, size_bytes: int) -> str | None:
    """Why a file of `size_bytes` cannot hold `name`, a model from the table (by its key, tag
    or Hugging Face id) or one whose name gives its size; None when it can, or when neither
    says. A size typed 1000x off (1MB for an 8B
    model) would raise the speed limit 1000x and hide every impossible figure."""
    shape = None
    for each in table_names(name):  # a Hugging Face id too, as vLLM and mlx_lm report it
        try:
            shape = known_model(each)
            break
        except SizingError:
            continue
    if shape is None:
        return _named_size_problem(name, size_bytes)
    params = shape.params_total
    if not params:
        return None
    bits = Fraction(size_bytes * 8, params)
    if _FILE_BITS_LOW <= bits <= _FILE_BITS_HIGH:
        return None
    low, high = params * _FILE_BITS_LOW / 8, params * _FILE_BITS_HIGH / 8
    return (
        f"{decimal_size_text(size_bytes)} cannot hold {shape.name}: its {params / 1e9:.1f}B "
        f"weights make files of {decimal_size_text(low)} to {decimal_size_text(high)} (1.4 to "
        f"34 bits a weight), and this is {float(bits):.3g} bits a weight; write the size "
        "`ollama list` or `ls -l` shows, such as 4.9GB"
    )


def _named_size_problem(name: str, size_bytes: int) -> str | None:
    """A model outside the table whose name gives its size (mystery-7b, Qwen2.5-0.5B): a file
    past 34 bits for each of its weights, with room for the name's rounding, is not it."""
    params = params_in_name(name)
    if params is None:
        return None
    most = params * NAME_ROUNDING * float(_FILE_BITS_HIGH) / 8
    if size_bytes <= most:
        return None
    return (
        f"{decimal_size_text(size_bytes)} cannot hold {name[:80]}: its name says about "
        f"{params / 1e9:g}B weights, which make files of at most about "
        f"{decimal_size_text(int(most))} (34 bits a weight); write the size `ollama list` or "
        "`ls -l` shows, such as 4.9GB"
    )


def resolve_shape(
    *, config: str | Path | None = None, gguf: str | Path | None = None, model: str | None = None
) -> ModelShape:
    """Pick the one model source a command was given, refusing none or several."""
    given = [x for x in (config, gguf, model) if x is not None]
    if len(given) != 1:
        raise SizingError(
            "name the model exactly one way: --config PATH (Hugging Face config.json), "
            "--gguf PATH (a GGUF file) or --model NAME (felab's table)"
        )
    if config is not None:
        return from_hf_config(config)
    if gguf is not None:
        return from_gguf(gguf)
    assert model is not None
    return known_model(model)


def weights_summary(shape: ModelShape) -> str:
    """Plain words for the weights a token reads, when they are known."""
    read = shape.weights_read_per_token()
    if read is None:
        return "weight bytes unknown"
    left_out = f" ({shape.weights_left_out})" if shape.weights_left_out else ""
    if shape.is_moe and shape.weights_bytes is not None:
        return (
            f"{both_ways(read)} of the {both_ways(shape.weights_bytes)} of weights are read per "
            f"token ({shape.n_experts_used} of {shape.n_experts} experts){left_out}"
        )
    return f"{both_ways(read)} of weights, all read for every token{left_out}"

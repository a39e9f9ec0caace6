"""A model's shape read from a Hugging Face `config.json` (a file, its folder, or a dict), with the
exact weight bytes from the safetensors headers beside it. Grouped-query attention, explicit head
sizes, DeepSeek-style latent caches, sliding windows and mixture-of-experts weights are each
said where they are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from felab_core.files import MiB, NamedFileError, broken_link, read_named_text
from felab_core.json_keys import KeyTwice, once
from felab_core.sizing.errors import SizingError
from felab_core.sizing.expert_params import moe_params
from felab_core.sizing.hybrid_layers import cache_layers, cache_layers_note
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.shape_agreement import (
    Reading,
    check_experts,
    check_head_width,
    check_weights_size,
    experts_held,
    hold_together,
    is_expert_tensor,
)
from felab_core.sizing.shape_values import (
    CONTEXT_LIMIT,
    active_bytes,
    check_groups,
    expert_counts,
    head_width,
    positive_int,
    shown_value,
)
from felab_core.sizing.tensor_agreement import (
    ShapeKeys,
    check_feed_forward,
    check_heads,
    check_layers_and_width,
)
from felab_core.text import holds_hidden, with_hidden_shown

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
    return isinstance(value, int | float) and value > CONTEXT_LIMIT


def _context_aliases(cfg: Mapping[str, Any]) -> list[str]:
    """A note for each context key that gives another length than the one read: Qwen's first
    config gives seq_length 8,192 (trained) beside max_position_embeddings 32,768 (its
    positions), so two lengths are said, not refused; either had been taken without a word."""
    given = [(k, cfg[k]) for k in _CONTEXT_KEYS if cfg.get(k) is not None]
    if given and given[-1][0] == "model_max_length" and _huge(given[-1][1]):
        given.pop()  # a tokenizer's "no limit", not a length
    return [
        f"the context length disagrees: {given[0][0]} {shown_value(given[0][1])} (read), but "
        f"{key} {shown_value(value)} in the same config; check the model card, and give the "
        "length the server runs with --max-len or --contexts"
        for key, value in given[1:]
        if value != given[0][1]
    ]


def _same_figure(a: tuple[str, Any], b: tuple[str, Any], a_from: str, b_from: str) -> None:
    hold_together(
        "one figure of the shape",
        Reading(a[1], f"{a[0]} {shown_value(a[1])}", a_from),
        Reading(b[1], f"{b[0]} {shown_value(b[1])}", b_from),
        room="two keys for one figure give one value",
        then="one of them is another model's or hand-edited: fix the config.json (or give it "
        "as downloaded)",
    )


#: A name that reads as one of felab's own lines ("error: your disk is full").
_SAID = re.compile(r"\s*(error|warning|note|waiting)\s*:", re.IGNORECASE)


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
    n_layers = positive_int(layers, layers_key, where)
    n_heads = positive_int(heads, heads_key, where)
    notes: list[str] = []

    kv_hit = _first(cfg, _KV_HEAD_KEYS)
    if kv_hit is not None:
        n_kv = positive_int(kv_hit[1], kv_hit[0], where)
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
    check_groups(n_heads, n_kv, where)

    hidden = positive_int(hidden_hit[1], hidden_hit[0], where) if hidden_hit else None
    head_key = "head_dim" if cfg.get("head_dim") is not None else "kv_channels"
    if cfg.get(head_key) is not None:
        head_dim = head_width(cfg[head_key], head_key, where)
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
        head_dim = head_width(
            hidden // n_heads, f"hidden_size {hidden:,} over {n_heads} heads", where
        )

    latent: int | None = None
    if cfg.get("kv_lora_rank") is not None:
        rank = head_width(cfg["kv_lora_rank"], "kv_lora_rank", where)
        rope = cfg.get("qk_rope_head_dim")
        rope = 0 if rope in (None, 0) else head_width(rope, "qk_rope_head_dim", where)
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
    n_experts, n_used = expert_counts(experts_hit, used_hit, where)  # 0 experts: dense
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
            positive_int(ctx_hit[1], ctx_hit[0], where, CONTEXT_LIMIT) if ctx_hit else None
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
    active = active_bytes(total, expert, shape)
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

"""Two readings of one figure, held to each other: a model's files say some things twice.

A config.json (or GGUF metadata) gives an expert count, and the tensors hold some number of
experts; the tensors' total size goes with the parameter count the shape or the name gives;
heads times head size goes with the hidden width; a split GGUF's shards are one model's. Each
pair had been read without a look at the other: 1,000 experts over tensors of 8 (125x), 2 MB of
tensors as a "70B", a head size 32x the width, another model's shard added to the first.
`hold_together` is the one comparison; the checks below call it for each pair.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from felab_core.sizing.errors import SizingError
from felab_core.sizing.model_names import NAME_ROUNDING, params_in_name
from felab_core.sizing.units import MIN_WEIGHTS_BYTES, decimal_size_text
from felab_core.text import with_hidden_shown

if TYPE_CHECKING:
    from felab_core.sizing.gguf_header import GGUFHeader
    from felab_core.sizing.shape import ModelShape


@dataclass(frozen=True)
class Reading:
    """One reading of a figure: its value, the words that show it, and where it was read."""

    value: Any
    shown: str
    source: str


def hold_together(
    figure: str, a: Reading, b: Reading, *, low: float = 1, high: float = 1, room: str, then: str
) -> None:
    """Refuse unless a.value / b.value lies in [low, high] (numbers; 1 and 1: equal) or the
    two values are equal (anything else), naming both values, both sources and what to do."""
    numbers = all(
        isinstance(r.value, int | float | Fraction) and not isinstance(r.value, bool)
        for r in (a, b)
    )
    if numbers:
        if a.value == b.value or (b.value > 0 and low <= Fraction(a.value) / b.value <= high):
            return
    elif a.value == b.value:
        return
    raise SizingError(
        f"{figure} disagrees: {a.shown} from {a.source}, but {b.shown} from {b.source} "
        f"({room}); {then}"
    )


# ---------------------------------------------------------------- experts

#: Expert weights under the names converters give them: Hugging Face's `mlp.experts.N`,
#: `block_sparse_moe.experts.N`, fused `experts.gate_up_proj`, mlx_lm's `switch_mlp`, Granite's
#: `block_sparse_moe.input_linear` (not `shared_experts`, read by every token).
_EXPERT_HF = re.compile(
    r"(?:^|\.)(?:experts|switch_mlp)\.|(?:^|\.)block_sparse_moe\.(?:input|output)_linear\."
)
_NUMBERED_HF = re.compile(r"^(.*?(?:^|\.)experts\.)(?:expert_)?(\d+)\.")
#: llama.cpp's `ffn_gate_exps` (up, down, gate_up; not `_shexp`), and the one tensor per
#: expert of its older Mixtral files (`blk.0.ffn_gate.3.weight`).
_EXPERT_GGUF = re.compile(r"_exps\.|^blk\.\d+\.ffn_(?:gate|up|down)\.\d+\.")
_NUMBERED_GGUF = re.compile(r"^(blk\.\d+\.ffn_(?:gate|up|down)\.)(\d+)\.")


def is_expert_tensor(name: str, *, gguf: bool) -> bool:
    """Whether the tensor holds routed experts' weights (read in part by each token)."""
    return bool((_EXPERT_GGUF if gguf else _EXPERT_HF).search(name + "."))


def experts_held(
    tensors: Iterable[tuple[str, tuple[int, ...]]], *, gguf: bool, said: int | None = None
) -> int | None:
    """How many experts the tensors hold (name, shape): the fewest distinct experts one layer
    numbers (experts 0 and 63 alone are 2, not 64: the highest number + 1 had passed a header
    holding 2 of 64), or a fused tensor's expert axis (ggml's last, Hugging Face's first);
    None when none says."""
    numbered: dict[str, set[int]] = {}
    fused = 0
    for name, dims in tensors:
        hit = (_NUMBERED_GGUF if gguf else _NUMBERED_HF).match(name)
        if hit is not None:
            numbered.setdefault(hit[1], set()).add(int(hit[2]))
        elif not is_expert_tensor(name, gguf=gguf):
            continue
        elif gguf and len(dims) >= 2:  # [embd, ff, experts]; a bias [ff, experts]
            fused = max(fused, dims[-1])
        elif not gguf and len(dims) >= 3:  # [experts, out, in]; DBRX's 2-D [experts*ff, in] not
            fused = max(fused, dims[0])
    if numbered:  # a layer numbering an expert past the count said holds that many at least
        reach = said if said is not None else float("inf")
        return min(
            len(found) if max(found) < reach else max(found) + 1 for found in numbered.values()
        )
    return fused or None


def check_experts(
    n_experts: int | None,
    key: str,
    where: str,
    held: int | None,
    tensors_from: str,
    *,
    tensors_held: bool = False,
) -> None:
    """The config's (or metadata's) expert count against the experts the tensors hold; a
    mixture's count beside tensors holding no experts at all is refused too (every weight had
    been read as "2 of 8 experts")."""
    if n_experts is None:
        return
    if held is None:
        if n_experts > 1 and tensors_held:
            raise SizingError(
                f"the number of experts disagrees: {key} {n_experts:,} from {where}, but "
                f"{tensors_from} hold no experts' tensors (a dense model's); give the config "
                "(or GGUF) that came with these weights"
            )
        return
    hold_together(
        "the number of experts",
        Reading(n_experts, f"{key} {n_experts:,}", where),
        Reading(held, f"{held:,} expert{'' if held == 1 else 's'}", tensors_from),
        room="one model's files give one count",
        then="the shape and the weights are two models': give the config (or GGUF) that came "
        "with these weights",
    )


# ---------------------------------------------------------------- attention width

#: Heads times head size against the hidden width: released models keep 0.5 (Falcon-H1) to 3
#: (GLM-4.5-Air) of it; 8 either way is a damaged shape, not an architecture.
_WIDTH_ROOM = 8


def check_head_width(
    heads: int, head_dim: int, hidden: int | None, where: str, *, head_key: str, hidden_key: str
) -> None:
    """An explicit head size: heads x head size held to the hidden width (Gemma's 16 x 256 =
    4,096 beside 3,584 is honest; 32x is not). Latent (MLA) heads are not checked."""
    if hidden is None:
        return
    apart = max(heads * head_dim / hidden, hidden / (heads * head_dim))
    hold_together(
        f"{where}: the attention width",
        Reading(
            heads * head_dim, f"{heads:,} heads x {head_dim:,} = {heads * head_dim:,}", head_key
        ),
        Reading(hidden, f"{hidden:,}", hidden_key),
        low=1 / _WIDTH_ROOM,
        high=_WIDTH_ROOM,
        room=f"{apart:.3g} times apart; released models keep them 0.5 to 3 times apart, felab "
        f"takes up to {_WIDTH_ROOM}",
        then="one of them is damaged: check both against the model card, or give the model's "
        "config.json as downloaded",
    )


# ---------------------------------------------------------------- the weights' size

#: Bits a weight a model's files hold: llama.cpp's smallest quants (a little under) to 32-bit
#: floats with the embeddings and metadata a file adds, as `file_size_problem` holds them.
_BITS_LOW, _BITS_HIGH = Fraction(14, 10), 34
#: The attention weights the shape gives are a floor (the feed-forward and embeddings come on
#: top); half of them leaves room for shapes whose attention is slimmer than the formula.
_ATTENTION_SLACK = 2


def _attention_weights(shape: ModelShape) -> int | None:
    """The attention projections the shape implies (q, k, v, out), a floor on the weights."""
    if shape.hidden_size is None or shape.latent_cache_dim is not None:
        return None
    kv_heads = shape.kv_heads_by_layer or (shape.n_kv_heads,) * shape.n_layers
    per_q = shape.n_heads * (shape.head_dim_k + shape.head_dim_v)
    per_kv = shape.head_dim_k + shape.head_dim_v
    return shape.hidden_size * sum(per_q + kv * per_kv for kv in kv_heads if kv)


def check_weights_size(shape: ModelShape) -> None:
    """The tensors' bytes against the weights the shape's attention alone holds, and against
    the parameter count the model's name gives (room for 1.4- to 34-bit files, the name's
    rounding, and a mixture named by its active weights: Llama-4-Scout-17B-16E)."""
    if shape.weights_from is None or not shape.weights_bytes:
        return
    if shape.weights_bytes < MIN_WEIGHTS_BYTES:  # no model's: weights_for says so when needed
        return
    bits = 8 * shape.weights_bytes
    tensors = Reading(bits, decimal_size_text(shape.weights_bytes), shape.weights_from)
    floor = _attention_weights(shape)
    if floor:
        hold_together(
            "the model's size",
            tensors,
            Reading(
                floor,
                f"a shape of {shape.n_layers:,} layers of width {shape.hidden_size:,} whose "
                f"attention alone holds {floor / 1e9:.3g}B weights",
                shape.source,
            ),
            low=float(_BITS_LOW) / _ATTENTION_SLACK,
            high=float("inf"),
            room=f"{float(Fraction(bits, floor)):.2g} bits for each of those, where files hold "
            f"{float(_BITS_LOW):g} to {_BITS_HIGH}",
            then="the weights are not this shape's (cut short, or another model's): give the "
            "weights that came with it, or name the model from felab's table with --model "
            "instead of its files",
        )
    named = params_in_name(shape.name)
    if named:
        mixture = Fraction(shape.n_experts or 1, shape.n_experts_used or 1) if shape.is_moe else 1
        hold_together(
            "the model's size",
            tensors,
            Reading(named, f"about {named / 1e9:g}B weights", f"its name {shape.name[:80]!r}"),
            low=float(_BITS_LOW) / NAME_ROUNDING,
            high=_BITS_HIGH * NAME_ROUNDING * float(mixture),
            room=f"{bits / named:.2g} bits a weight, where files hold {float(_BITS_LOW):g} to "
            f"{_BITS_HIGH}",
            then="the name or the weights are another model's: give one model's files (the "
            "config.json or GGUF that came with these weights), or name the model from felab's "
            "table with --model instead of its files",
        )


# ---------------------------------------------------------------- split GGUF shards

_BLOCK = re.compile(r"^blk\.(\d+)\.")
#: Per-layer tensors whose ggml shape carries the width: inputs on the first axis, outputs on
#: the second (llama.cpp's loader holds each to n_embd).
_WIDE = re.compile(
    r"^blk\.\d+\.(?:(?P<inp>attn_norm|ffn_norm|attn_q|attn_k|attn_v|ffn_gate|ffn_up"
    r"|ffn_gate_exps|ffn_up_exps)|(?P<out>attn_output|ffn_down|ffn_down_exps))\.weight$"
)


def width_in_shard(name: str, dims: tuple[int, ...]) -> int | None:
    """The width a GGUF layer tensor carries (ggml's order: inputs first), or None."""
    hit = _WIDE.match(name)
    if hit is None:
        return None
    axis = 0 if hit["inp"] else 1
    return dims[axis] if len(dims) > axis else None


def _shown(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = with_hidden_shown(repr(value))
    return text if len(text) <= 40 else text[:37] + "..."


def check_shard(
    first: GGUFHeader,
    first_path: Path,
    shard: GGUFHeader,
    shard_path: Path,
    index: int,
    *,
    arch: str,
    n_layers: int,
    hidden: int | None,
) -> None:
    """Shard `index` (0-based) of a split GGUF against the first: the split keys, any metadata
    both give, its blocks within the model's and its width the model's (llama.cpp's own rules)."""
    one = f"the first shard {with_hidden_shown(str(first_path))}"
    this = f"shard {index + 1:,} {with_hidden_shown(str(shard_path))}"
    then = (
        "the shards are not one model's (another download's shard beside these?): put the "
        "model's own shards together, downloaded from one place"
    )

    def same(figure: str, a: Any, b: Any, a_from: str = one, b_from: str = this) -> None:
        hold_together(
            figure,
            Reading(a, _shown(a), a_from),
            Reading(b, _shown(b), b_from),
            room="one model's shards agree",
            then=then,
        )

    same("split.count", first.fields.get("split.count"), shard.fields.get("split.count"))
    same("split.no", index, shard.fields.get("split.no"), "its place among the shards")
    for key in sorted(set(first.fields) & set(shard.fields)):
        if key not in ("split.no", "split.count"):  # split.tensors.count: the whole model's
            same(with_hidden_shown(key[:80]), first.fields[key], shard.fields[key])
    for tensor in shard.tensors:
        hit = _BLOCK.match(tensor.name)
        if hit is not None and int(hit[1]) >= n_layers:
            raise SizingError(
                f"{this} holds {with_hidden_shown(tensor.name[:80])}, but {one} gives "
                f"{arch}.block_count {n_layers:,} (blocks 0 to {n_layers - 1:,}); {then}"
            )
        width = width_in_shard(tensor.name, tensor.dims)  # any tensor carrying it, not the norm
        if hidden is not None and width is not None:
            same(
                "the model's width",
                hidden,
                width,
                f"{one} ({arch}.embedding_length)",
                f"{this} ({with_hidden_shown(tensor.name[:80])})",
            )


def check_tensor_count(first: GGUFHeader, first_path: Path, listed: int, shards: int) -> None:
    """The first shard's split.tensors.count against the tensors all shards list."""
    said = first.fields.get("split.tensors.count")
    if said is None:
        return
    hold_together(
        "the split GGUF's tensor count",
        Reading(said, f"split.tensors.count {_shown(said)}", with_hidden_shown(str(first_path))),
        Reading(listed, f"{listed:,} tensors", f"its {shards:,} shards together"),
        room="one model's shards list the tensors the first counts",
        then="the shards are not one model's (another download's shard beside these?): put the "
        "model's own shards together, downloaded from one place",
    )

"""A model's shape and exact weight bytes read from a GGUF file's metadata and tensor list
(all shards of a split GGUF), held to what the tensors themselves say.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from felab_core.files import NamedFileError, refuse_special
from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_hybrid import gguf_cache_layers, kv_zeros_mark_layers
from felab_core.sizing.hybrid_layers import cache_layers_note
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.shape_agreement import (
    check_experts,
    check_head_width,
    check_shard,
    check_tensor_count,
    check_weights_size,
    experts_held,
    is_expert_tensor,
)
from felab_core.sizing.shape_values import (
    CONTEXT_LIMIT,
    SHAPE_LIMIT,
    active_bytes,
    check_groups,
    expert_counts,
    head_width,
    positive_int,
    shown_value,
)
from felab_core.sizing.tensor_agreement import (
    ShapeKeys,
    check_heads,
    check_layers_and_width,
)
from felab_core.text import holds_hidden, with_hidden_shown

if TYPE_CHECKING:
    from felab_core.sizing.gguf_header import GGUFHeader


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
                f"{where}: {key} holds {shown_value(v)}, not a whole number; check that the "
                "file is a model's GGUF"
            )
        if isinstance(value, list) and not 0 <= v <= SHAPE_LIMIT:
            raise SizingError(
                f"{where}: {key} holds {v:,} for a layer, and a layer has 0 to "
                f"{SHAPE_LIMIT:,}; check that the file is a model's GGUF"
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
            f"{gguf_path}: general.architecture is {shown_value(arch)}, not an architecture's "
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
        hidden = positive_int(hidden, f"{arch}.embedding_length", where)
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
    n_layers = positive_int(layers, f"{arch}.block_count", str(gguf_path))
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
    heads = positive_int(heads, f"{arch}.attention.head_count", str(gguf_path))
    if kv_by_layer is None:  # a per-layer list may hold zeros (layers without attention)
        kv = positive_int(kv, f"{arch}.attention.head_count_kv", str(gguf_path))
        for layer, layer_heads in enumerate(heads_by_layer or ()):
            if layer_heads < kv:  # [2, 0] beside 2 KV heads: a layer caching for no query head
                raise SizingError(
                    f"{gguf_path}: layer {layer} has {layer_heads} query heads but {kv} KV heads "
                    "(each KV head serves one or more query heads); check that the file is a "
                    "model's GGUF"
                )
            check_groups(layer_heads, int(kv), f"{gguf_path} (layer {layer})")
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
                check_groups(layer_heads, layer_kv, f"{gguf_path} (layer {layer})")
    elif kv:
        check_groups(int(heads), int(kv), str(gguf_path))
    key_len = key("attention.key_length")
    value_len = key("attention.value_length")
    if key_len is not None:
        key_len = head_width(key_len, f"{arch}.attention.key_length", str(gguf_path))
    if value_len is not None:
        value_len = head_width(value_len, f"{arch}.attention.value_length", str(gguf_path))
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
        key_len = head_width(
            int(hidden) // int(heads),
            f"{arch}.embedding_length {hidden:,} over {heads} heads",
            where,
        )
    if value_len is None:
        value_len = key_len

    latent = None
    kv_rank = key("attention.kv_lora_rank")
    if kv_rank:
        kv_rank = head_width(kv_rank, f"{arch}.attention.kv_lora_rank", str(gguf_path))
        rope = key("rope.dimension_count") or 0
        if rope:
            rope = head_width(rope, f"{arch}.rope.dimension_count", str(gguf_path))
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
    n_experts, n_used = expert_counts(experts_hit, used_hit, str(gguf_path))
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
        context = positive_int(context, f"{arch}.context_length", str(gguf_path), CONTEXT_LIMIT)
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
    active = active_bytes(total, expert, shape) if total else None
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

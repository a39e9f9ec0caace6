"""A tiny Llama model that felab makes itself, so llama.cpp, MLX and vLLM serve the same weights.

This machine (and CI) has no model hub, and a timing lab needs a model whose every answer is known
in advance. `write_tiny_model` writes one set of weights twice, as a Hugging Face folder (config,
safetensors, tokenizer with a ChatML chat template) for MLX and vLLM, and as a GGUF file for
llama.cpp. Only numpy, safetensors, tokenizers and gguf are used: no torch, no network.

Long because the weights, the tokenizer and both file formats must agree to the byte: split, the
reasons for each choice below would be a file away from the code that depends on them.

How the weights are arranged (and why):

* The layers are random, so every engine really does the work of a Llama model of that shape.
* The residual stream is split in two. The first `TOKEN_DIMS` dimensions carry a one-hot code of
  the current token; no layer writes there (those rows of `o_proj` and `down_proj` are zero), and
  `lm_head` reads only there. The logits are therefore the current token's code times `lm_head`,
  divided by one positive RMS factor, so the greedy next token depends on the current token alone,
  with a wide margin that float rounding on any engine cannot flip.
* `lm_head` maps every prompt token to the start word `Lorem`, and each generated word to the next
  word of a fixed cycle (`ipsum dolor sit ...`). Greedy generation therefore never emits an end
  token, a special token, a raw byte or a bare space: every request runs to `max_tokens`, each
  token is one non-empty text chunk, and `expected_text(n)` says exactly what comes back.
* The first word has no leading space, so engines that trim the first token's space (MLX) and
  engines that do not (llama.cpp) stream the same text.

The tokenizer is Llama-2 style (byte-fallback BPE, 256 byte tokens, a space prefix after every
special token, as llama.cpp's SPM tokenizer does), so prompt token counts agree across engines.
Every multi-character token has exactly one split into two tokens, so BPE merge ranks (Hugging
Face) and SPM scores (llama.cpp) segment every text the same way.

Bytes are identical on every run: weights come from `numpy.random.RandomState`, whose stream numpy
keeps frozen, and only element-wise float arithmetic follows; JSON is written with sorted keys.

Long because it is the model itself: the Llama tensors, the tokenizer, and both file formats (HF and
GGUF) written from one set of weights; split, the two writers would drift apart.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from felab_core.lab._lock import file_lock

#: Bump when the generator's output changes for the same spec, so caches are not reused.
GENERATOR_VERSION = 1

#: Dimensions of the residual stream that hold the token code read by `lm_head`.
TOKEN_DIMS = 48

SPACE = "\u2581"  # SentencePiece's "▁", which stands for a space inside tokens
UNK, BOS, EOS = "<unk>", "<s>", "</s>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

START_WORD = "Lorem"
CYCLE_WORDS = (
    "ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "
    "et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi "
    "aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum "
    "fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui officia"
).split()

_SINGLE_CHARS = (
    [SPACE]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    + [str(d) for d in range(10)]
    + list(".,!?'-:;()\"/")
)
_FILLER_CHARS = list("~@#$%&*+=<>[]{}|^_`\\")

# GGUF token types (llama.cpp's llama_token_type)
_TT_NORMAL, _TT_UNKNOWN, _TT_CONTROL, _TT_BYTE = 1, 2, 3, 6


@dataclass(frozen=True)
class TinyModelSpec:
    """The shape of a generated model; every field goes into the cache key."""

    name: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    context: int = 4096
    vocab: int = 512
    seed: int = 20240602
    rms_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def n_params(self) -> int:
        attn = self.hidden * self.head_dim * (2 * self.n_heads + 2 * self.n_kv_heads)
        mlp = 3 * self.hidden * self.ffn
        per_layer = attn + mlp + 2 * self.hidden
        return self.n_layers * per_layer + 2 * self.vocab * self.hidden + self.hidden

    def cache_key(self) -> str:
        blob = json.dumps({"spec": asdict(self), "generator": GENERATOR_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


#: Named sizes. "tiny" decodes in about a millisecond a token (it measures the serving path);
#: "slow" (~91M parameters, 365 MB in f32) takes ~15 ms a token on llama-server with `-t 1`, so
#: decode time dominates HTTP overhead when a test needs visible decode time.
SIZES: dict[str, TinyModelSpec] = {
    "tiny": TinyModelSpec(
        "tiny", n_layers=2, hidden=64, n_heads=2, n_kv_heads=2, head_dim=32, ffn=192
    ),
    "slow": TinyModelSpec(
        "slow", n_layers=8, hidden=1024, n_heads=16, n_kv_heads=4, head_dim=64, ffn=2816
    ),
}


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    scores: list[float]
    types: list[int]
    merges: list[tuple[str, str]]
    start_id: int
    cycle_ids: list[int]

    @property
    def ids(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.tokens)}


def build_vocab(size: int = 512) -> Vocab:
    """Specials, 256 byte tokens, single characters, then prefix chains of the generated words."""
    tokens = [UNK, BOS, EOS] + [f"<0x{b:02X}>" for b in range(256)] + [IM_START, IM_END]
    types = [_TT_UNKNOWN, _TT_CONTROL, _TT_CONTROL] + [_TT_BYTE] * 256 + [_TT_CONTROL] * 2
    tokens += _SINGLE_CHARS
    types += [_TT_NORMAL] * len(_SINGLE_CHARS)
    merged: list[str] = []  # multi-character tokens in merge order (rank)
    present = set(tokens)

    def chain(word: str) -> list[str]:
        return [word[:k] for k in range(2, len(word) + 1) if word[:k] not in present]

    cycle: list[str] = []
    budget = size - len(tokens) - len(chain(START_WORD)) - len(_FILLER_CHARS)
    for piece in chain(START_WORD):
        merged.append(piece)
        present.add(piece)
    for word in CYCLE_WORDS:
        if len(cycle) + 2 > TOKEN_DIMS - 1:  # code 0: "any prompt token", code 1: START_WORD
            break
        new = chain(SPACE + word)
        if len(new) > budget:
            continue
        budget -= len(new)
        merged += new
        present.update(new)
        cycle.append(SPACE + word)
    tokens += merged
    types += [_TT_NORMAL] * len(merged)
    fill = _FILLER_CHARS[: size - len(tokens)]
    tokens += fill
    types += [_TT_NORMAL] * len(fill)
    if len(tokens) != size:
        raise ValueError(f"vocabulary has {len(tokens)} tokens, wanted {size}")
    ids = {t: i for i, t in enumerate(tokens)}
    merge_rank = {t: r for r, t in enumerate(merged)}
    # SPM merges the highest score first; BPE the lowest rank: make them the same order.
    scores = [-1.0 - merge_rank[t] if t in merge_rank else 0.0 for t in tokens]
    merges = [(t[:-1], t[-1]) for t in merged]
    return Vocab(tokens, scores, types, merges, ids[START_WORD], [ids[w] for w in cycle])


def _successor(vocab: Vocab) -> dict[int, int]:
    """Greedy next token for each generated word (everything else leads to the start word)."""
    nxt = {vocab.start_id: vocab.cycle_ids[0]}
    for a, b in zip(vocab.cycle_ids, vocab.cycle_ids[1:] + vocab.cycle_ids[:1], strict=True):
        nxt[a] = b
    return nxt


def _token_code(vocab: Vocab) -> list[int]:
    """The one-hot code each token puts in the token dimensions: 0 for prompt tokens."""
    code = [0] * len(vocab.tokens)
    code[vocab.start_id] = 1
    for k, tid in enumerate(vocab.cycle_ids):
        code[tid] = 2 + k
    return code


def _uniform(seed: int, name: str, shape: tuple[int, ...], std: float) -> npt.NDArray[np.float32]:
    """Uniform noise with standard deviation `std`, seeded per tensor name (order-independent)."""
    rs = np.random.RandomState((seed ^ zlib.crc32(name.encode())) & 0xFFFFFFFF)
    u = rs.random_sample(int(np.prod(shape)))
    out: npt.NDArray[np.float32] = ((2.0 * u - 1.0) * (std * np.sqrt(3.0))).astype(np.float32)
    return out.reshape(shape)


def make_weights(spec: TinyModelSpec, vocab: Vocab) -> dict[str, npt.NDArray[np.float32]]:
    """Hugging Face Llama tensors (row-major [out, in]) for `spec`, arranged as the module says."""
    d, s = spec.hidden, spec.seed
    if d < TOKEN_DIMS + 16:
        raise ValueError(f"hidden size must be at least {TOKEN_DIMS + 16}")
    code = _token_code(vocab)
    succ = _successor(vocab)
    a, b, noise = 4.0, 4.0, 0.02
    w: dict[str, npt.NDArray[np.float32]] = {}

    emb = _uniform(s, "embed", (spec.vocab, d), 1.0)
    emb[:, :TOKEN_DIMS] = _uniform(s, "embed.code", (spec.vocab, TOKEN_DIMS), noise)
    emb[np.arange(spec.vocab), code] += np.float32(a)
    w["model.embed_tokens.weight"] = emb

    head = np.zeros((spec.vocab, d), dtype=np.float32)
    head[:, :TOKEN_DIMS] = _uniform(s, "lm_head.code", (spec.vocab, TOKEN_DIMS), noise)
    head[vocab.start_id, 0] += np.float32(b)
    for cur, nxt in succ.items():
        head[nxt, code[cur]] += np.float32(b)
    w["lm_head.weight"] = head
    w["model.norm.weight"] = np.ones(d, dtype=np.float32)

    q_out, kv_out = spec.n_heads * spec.head_dim, spec.n_kv_heads * spec.head_dim
    for i in range(spec.n_layers):
        p = f"model.layers.{i}."

        def rnd(name: str, out: int, inp: int, p: str = p) -> npt.NDArray[np.float32]:
            return _uniform(s, p + name, (out, inp), 1.0 / np.sqrt(inp))

        w[p + "input_layernorm.weight"] = np.ones(d, dtype=np.float32)
        w[p + "post_attention_layernorm.weight"] = np.ones(d, dtype=np.float32)
        w[p + "self_attn.q_proj.weight"] = rnd("q", q_out, d)
        w[p + "self_attn.k_proj.weight"] = rnd("k", kv_out, d)
        w[p + "self_attn.v_proj.weight"] = rnd("v", kv_out, d)
        o = rnd("o", d, q_out)
        o[:TOKEN_DIMS] = 0.0  # layers never write the token code
        w[p + "self_attn.o_proj.weight"] = o
        w[p + "mlp.gate_proj.weight"] = rnd("gate", spec.ffn, d)
        w[p + "mlp.up_proj.weight"] = rnd("up", spec.ffn, d)
        down = rnd("down", d, spec.ffn)
        down[:TOKEN_DIMS] = 0.0
        w[p + "mlp.down_proj.weight"] = down
    _check_margins(emb, head, vocab)
    return w


def _check_margins(
    emb: npt.NDArray[np.float32], head: npt.NDArray[np.float32], vocab: Vocab
) -> None:
    """Refuse weights whose greedy choice is not the designed one by a wide margin."""
    logits = emb[:, :TOKEN_DIMS].astype(np.float64) @ head[:, :TOKEN_DIMS].astype(np.float64).T
    succ = _successor(vocab)
    want = np.array([succ.get(t, vocab.start_id) for t in range(len(vocab.tokens))])
    top2 = np.sort(logits, axis=1)[:, -2:]
    if not (np.argmax(logits, axis=1) == want).all() or (top2[:, 1] - top2[:, 0]).min() < 8.0:
        raise AssertionError("tiny model: greedy margins too small; change the arrangement")


def tokenizer_json(vocab: Vocab) -> dict[str, Any]:
    """A Llama-2 style `tokenizer.json` written as plain JSON (stable bytes across versions)."""
    specials = [UNK, BOS, EOS, IM_START, IM_END]
    ids = vocab.ids
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": ids[t],
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for t in specials
        ],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": SPACE},
                {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": UNK,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": ids,
            "merges": [f"{x} {y}" for x, y in vocab.merges],
        },
    }


def _hf_files(spec: TinyModelSpec, vocab: Vocab) -> dict[str, dict[str, Any]]:
    ids = vocab.ids
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": spec.hidden,
        "intermediate_size": spec.ffn,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "num_key_value_heads": spec.n_kv_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": spec.context,
        "rms_norm_eps": spec.rms_eps,
        "rope_theta": spec.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "vocab_size": spec.vocab,
        "bos_token_id": ids[BOS],
        "eos_token_id": ids[IM_END],
        "torch_dtype": "float32",
        "initializer_range": 0.02,
        "use_cache": True,
    }
    special = {"bos_token": BOS, "eos_token": IM_END, "unk_token": UNK, "pad_token": EOS}
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "legacy": True,
        "model_max_length": spec.context,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(ids[t]): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for t in (UNK, BOS, EOS, IM_START, IM_END)
        },
    }
    generation = {"bos_token_id": ids[BOS], "eos_token_id": ids[IM_END], "do_sample": False}
    return {
        "config.json": config,
        "generation_config.json": generation,
        "tokenizer_config.json": tok_config,
        "special_tokens_map.json": special,
        "tokenizer.json": tokenizer_json(vocab),
    }


def _permute_qk(w: npt.NDArray[np.float32], n_head: int) -> npt.NDArray[np.float32]:
    """llama.cpp's rotary layout for q/k rows (the same permute as convert_hf_to_gguf.py)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


_GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def _write_gguf(
    path: Path, spec: TinyModelSpec, vocab: Vocab, w: dict[str, npt.NDArray[np.float32]]
) -> None:
    import gguf

    ids = vocab.ids
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name(f"felab {spec.name}")
    writer.add_context_length(spec.context)
    writer.add_embedding_length(spec.hidden)
    writer.add_block_count(spec.n_layers)
    writer.add_feed_forward_length(spec.ffn)
    writer.add_head_count(spec.n_heads)
    writer.add_head_count_kv(spec.n_kv_heads)
    writer.add_key_length(spec.head_dim)
    writer.add_value_length(spec.head_dim)
    writer.add_rope_dimension_count(spec.head_dim)
    writer.add_rope_freq_base(spec.rope_theta)
    writer.add_layer_norm_rms_eps(spec.rms_eps)
    writer.add_vocab_size(spec.vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(vocab.tokens)
    writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    writer.add_unk_token_id(ids[UNK])
    writer.add_bos_token_id(ids[BOS])
    writer.add_eos_token_id(ids[IM_END])
    writer.add_eot_token_id(ids[IM_END])
    writer.add_pad_token_id(ids[EOS])
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(True)
    writer.add_chat_template(CHAT_TEMPLATE)

    writer.add_tensor("token_embd.weight", w["model.embed_tokens.weight"])
    for i in range(spec.n_layers):
        for hf, gg in _GGUF_NAMES.items():
            t = w[f"model.layers.{i}.{hf}"]
            if hf.startswith("self_attn.q_proj"):
                t = _permute_qk(t, spec.n_heads)
            elif hf.startswith("self_attn.k_proj"):
                t = _permute_qk(t, spec.n_kv_heads)
            writer.add_tensor(f"blk.{i}.{gg}", np.ascontiguousarray(t))
    writer.add_tensor("output_norm.weight", w["model.norm.weight"])
    writer.add_tensor("output.weight", w["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@dataclass(frozen=True)
class TinyModel:
    """A generated model on disk: the HF folder (MLX, vLLM) and the GGUF file (llama.cpp)."""

    hf_dir: Path
    gguf_path: Path
    spec: TinyModelSpec

    def expected_pieces(self, n_tokens: int) -> list[str]:
        """The text of each token greedy decoding streams after a chat prompt."""
        vocab = build_vocab(self.spec.vocab)
        succ = _successor(vocab)
        out, tid = [], vocab.start_id
        for _ in range(n_tokens):
            out.append(vocab.tokens[tid].replace(SPACE, " "))
            tid = succ[tid]
        return out

    def expected_text(self, n_tokens: int) -> str:
        """Exactly what a greedy chat completion of `n_tokens` returns ("Lorem ipsum dolor ...")."""
        return "".join(self.expected_pieces(n_tokens))


class ModelFolderError(ValueError):
    """The folder holds files felab would have to replace; the message names them."""


def _write_files(out_dir: Path, spec: TinyModelSpec) -> None:
    from safetensors.numpy import save_file

    vocab = build_vocab(spec.vocab)
    weights = make_weights(spec, vocab)
    hf_dir = out_dir / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    for name, content in _hf_files(spec, vocab).items():
        text = json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        (hf_dir / name).write_text(text, encoding="utf-8")
    save_file(weights, str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
    _write_gguf(out_dir / f"{spec.name}.gguf", spec, vocab, weights)


def _same_bytes(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as fa, b.open("rb") as fb:
        while chunk := fa.read(1 << 20):
            if chunk != fb.read(1 << 20):
                return False
    return True


def write_tiny_model(out_dir: Path, size: str = "tiny") -> TinyModel:
    """Write the `size` model into `out_dir` (`hf/` and `<size>.gguf`); same bytes every run.

    Written beside the folder's files first, then moved into place: a file already there is
    replaced only when it holds the very bytes felab writes (a second run), never a person's
    own config, weights or GGUF of the same name, and never through a link (ModelFolderError
    names them all before anything is moved).
    """
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    spec = SIZES[size]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        scratch = Path(tempfile.mkdtemp(dir=out_dir, prefix=".felab-model-"))
    except OSError as exc:  # said of the folder asked for, not of felab's scratch name
        raise ModelFolderError(
            f"cannot write in {out_dir} ({exc.strerror or exc}): choose another --out"
        ) from None
    try:
        _write_files(scratch, spec)
        made = sorted(p.relative_to(scratch) for p in scratch.rglob("*") if p.is_file())
        clashes = []
        for rel in made:
            there = out_dir / rel
            if there.is_symlink() or (
                there.exists() and (not there.is_file() or not _same_bytes(there, scratch / rel))
            ):
                clashes.append(str(rel))
        if clashes:
            raise ModelFolderError(
                f"{out_dir} already holds {', '.join(clashes)}, not the {spec.name} model felab "
                "writes (or a link): move them aside or choose another --out"
            )
        for rel in made:
            (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(scratch / rel, out_dir / rel)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return TinyModel(hf_dir=out_dir / "hf", gguf_path=out_dir / f"{spec.name}.gguf", spec=spec)


def cached_tiny_model(size: str = "tiny", cache_dir: Path | None = None) -> TinyModel:
    """The `size` model from felab's cache, generated once per spec and generator version.

    Written to a temporary folder and renamed into place under a lock, so a generation that was
    interrupted is never mistaken for a finished one.
    """
    from felab_core.settings import get_settings

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    spec = SIZES[size]
    root = (cache_dir or get_settings().cache_dir) / "models"
    final = root / f"{spec.name}-{spec.cache_key()}"

    def found() -> TinyModel:
        return TinyModel(final / "hf", final / f"{spec.name}.gguf", spec)

    if final.is_dir():
        return found()
    with file_lock(root / ".lock"):
        if final.is_dir():
            return found()
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{spec.name}-"))
        try:
            write_tiny_model(tmp, size)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return found()

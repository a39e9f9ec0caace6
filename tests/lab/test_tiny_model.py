"""The generated model: same bytes every run, readable as GGUF and HF, greedy output known."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from felab_core.lab.tiny_model import (
    IM_END,
    IM_START,
    SIZES,
    SPACE,
    TOKEN_DIMS,
    ModelFolderError,
    TinyModel,
    build_vocab,
    cached_tiny_model,
    make_weights,
    write_tiny_model,
)


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_same_bytes_on_every_run(tmp_path: Path) -> None:
    a = write_tiny_model(tmp_path / "a", "tiny")
    b = write_tiny_model(tmp_path / "b", "tiny")
    ha, hb = _hashes(tmp_path / "a"), _hashes(tmp_path / "b")
    assert ha == hb
    assert set(ha) == {
        "hf/config.json",
        "hf/generation_config.json",
        "hf/model.safetensors",
        "hf/special_tokens_map.json",
        "hf/tokenizer.json",
        "hf/tokenizer_config.json",
        "tiny.gguf",
    }
    assert a.gguf_path.name == b.gguf_path.name == "tiny.gguf"


def test_a_second_run_replaces_its_own_files_and_no_one_elses(tmp_path: Path) -> None:
    """The folder may already hold a person's model: felab replaces a file only when it holds
    the very bytes felab writes, never through a link, and moves nothing when one clashes."""
    write_tiny_model(tmp_path / "again", "tiny")
    first = _hashes(tmp_path / "again")
    write_tiny_model(tmp_path / "again", "tiny")  # a second run: the same bytes, no complaint
    assert _hashes(tmp_path / "again") == first
    mine = tmp_path / "mine"
    (mine / "hf").mkdir(parents=True)
    (mine / "hf" / "config.json").write_text('{"my": "real config"}')
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    (mine / "tiny.gguf").symlink_to(outside)
    with pytest.raises(ModelFolderError, match=r"hf/config\.json, tiny\.gguf"):
        write_tiny_model(mine, "tiny")
    assert (mine / "hf" / "config.json").read_text() == '{"my": "real config"}'
    assert outside.read_text() == "precious"
    assert sorted(p.name for p in mine.rglob("*")) == ["config.json", "hf", "tiny.gguf"]


def test_shape_matches_the_notes(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path, "tiny")
    assert model.spec.n_params == 172_352  # 2 layers, hidden 64, 2 heads of 32, ffn 192
    weights = load_file(str(model.hf_dir / "model.safetensors"))
    assert sum(int(np.prod(t.shape)) for t in weights.values()) == model.spec.n_params
    assert all(t.dtype == np.float32 for t in weights.values())
    assert SIZES["slow"].n_params > 80_000_000


def test_gguf_is_readable_and_holds_the_same_weights(tmp_path: Path) -> None:
    import gguf

    model = write_tiny_model(tmp_path, "tiny")
    reader = gguf.GGUFReader(str(model.gguf_path))
    fields = reader.fields

    def text(key: str) -> str:
        f = fields[key]
        return bytes(f.parts[f.data[0]]).decode()

    assert text("general.architecture") == "llama"
    assert text("tokenizer.ggml.model") == "llama"
    assert IM_START in text("tokenizer.chat_template")
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 3 + 9 * model.spec.n_layers
    hf = load_file(str(model.hf_dir / "model.safetensors"))
    hf_emb = hf["model.embed_tokens.weight"]
    emb = np.asarray(tensors["token_embd.weight"].data).reshape(hf_emb.shape)
    assert np.array_equal(emb, hf_emb)
    down = np.asarray(tensors["blk.1.ffn_down.weight"].data)
    assert np.array_equal(
        down.reshape(hf["model.layers.1.mlp.down_proj.weight"].shape),
        hf["model.layers.1.mlp.down_proj.weight"],
    )


def test_hf_folder_is_a_llama_with_a_chatml_tokenizer(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path, "tiny")
    config = json.loads((model.hf_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["head_dim"] == 32  # vLLM's CPU attention needs 32 or more
    tok = Tokenizer.from_file(str(model.hf_dir / "tokenizer.json"))
    prompt = f"{IM_START}user\nHi there{IM_END}\n{IM_START}assistant\n"
    enc = tok.encode(prompt, add_special_tokens=False)
    assert enc.tokens[0] == IM_START
    assert enc.tokens.count(IM_START) == 2 and enc.tokens.count(IM_END) == 1
    assert enc.tokens[1] == f"{SPACE}u"  # llama.cpp's rule: a space after a special token
    assert enc.tokens[-1] == "<0x0A>"  # the newline falls back to a byte token
    assert tok.decode(enc.ids, skip_special_tokens=True).startswith("user")


def test_greedy_choice_is_designed_for_every_token() -> None:
    """Whatever the last prompt token, greedy decoding starts "Lorem" and follows the cycle."""
    vocab = build_vocab()
    spec = SIZES["tiny"]
    w = make_weights(spec, vocab)
    emb = w["model.embed_tokens.weight"][:, :TOKEN_DIMS].astype(np.float64)
    head = w["lm_head.weight"].astype(np.float64)
    assert not head[:, TOKEN_DIMS:].any()  # the layers cannot change the choice
    for name in (n for n in w if n.endswith(("o_proj.weight", "down_proj.weight"))):
        assert not w[name][:TOKEN_DIMS].any()
    nxt = np.argmax(emb @ head[:, :TOKEN_DIMS].T, axis=1)
    allowed = {vocab.start_id, *vocab.cycle_ids}
    assert set(nxt.tolist()) <= allowed
    for tid in allowed:  # what can be generated: one word, never special, byte or bare space
        piece = vocab.tokens[tid]
        assert piece.strip(SPACE) and not piece.startswith("<") and piece != SPACE


def test_expected_text_is_exact_per_token() -> None:
    model = TinyModel(Path("/nonexistent/hf"), Path("/nonexistent/x.gguf"), SIZES["tiny"])
    pieces = model.expected_pieces(50)
    assert len(pieces) == 50 and all(p.strip() for p in pieces)
    assert pieces[0] == "Lorem" and pieces[1] == " ipsum"
    assert model.expected_text(3) == "Lorem ipsum dolor"


def test_cache_generates_once(isolated_cache: Path) -> None:
    first = cached_tiny_model("tiny")
    stamp = first.gguf_path.stat().st_mtime_ns
    again = cached_tiny_model("tiny")
    assert again == first and again.gguf_path.stat().st_mtime_ns == stamp
    assert first.gguf_path.is_relative_to(isolated_cache)
    assert not list((isolated_cache / "models").glob(".tiny-*"))  # no temp folder left


def test_unknown_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tiny, slow"):
        write_tiny_model(tmp_path, "huge")

"""`user:password@host` with no scheme (independent sweep 23, s3 H2): masked by redact(), and
so refused by secret_problem, the one check for text felab stores or shows; honest text with a
colon and an `@` (a model's tag and quantization, an email, an image digest) stays."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from felab_core.numbers.run_keys import first_difference, run_named
from felab_core.redact import redact, secret_problem

_LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12)
_HOST = st.one_of(
    st.builds(
        lambda a, b, tld: f"{a}.{b}.{tld}",
        _LABEL,
        _LABEL,
        st.sampled_from(["local", "com", "io", "lan", "co"]),
    ),
    st.builds(lambda a, tld: f"{a}.{tld}", _LABEL, st.sampled_from(["local", "internal", "org"])),
    st.builds(lambda *n: ".".join(map(str, n)), *[st.integers(0, 255)] * 4),
    st.just("localhost"),
)
_USER = st.text("abcdefghijklmnopqrstuvwxyz0123456789._-", max_size=12)
#: A password: no space or quote (a word's end), not `//` first (a scheme's), and not one that
#: ends as a host would begin (`x@a.com` inside it is a host of its own: masked more, never less)
_PASSWORD = st.text(
    st.characters(codec="ascii", categories=["L", "N", "P", "S"], exclude_characters="'\"@`"),
    min_size=1,
    max_size=24,
).filter(lambda p: not p.startswith("//") and p != "***")


@given(_USER, _PASSWORD, _HOST, st.sampled_from(["", ":8080", "/m.gguf", ":5432/db"]))
def test_a_password_before_a_host_is_masked_with_or_without_a_scheme(
    user: str, password: str, host: str, tail: str
) -> None:
    bare = f"{user}:{password}@{host}{tail}"
    assert redact(bare) == f"{user}:***@{host}{tail}"
    assert redact(f"host {bare}, target x") == f"host {user}:***@{host}{tail}, target x"
    assert (
        secret_problem("host", bare) == f"the host holds a password or key ({redact(bare)[:80]!r})"
    )
    assert redact(redact(bare)) == redact(bare)  # masked once, masked for good


_NAME = st.text("abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=16)
_TAG = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)


@given(_NAME, _TAG, st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=10))
def test_a_models_tag_and_quantization_stay(name: str, tag: str, quant: str) -> None:
    """`llama3.1:8b@q4_K_M`: after the `@` no host (no dot), so no password before it."""
    text = f"{name}:{tag}@{quant}"
    assert redact(text) == text and secret_problem("model", text) == ""


@given(_USER.filter(bool), _HOST, st.sampled_from(["", "mailto:", "e-mail:", "Contact: "]))
def test_an_email_stays(local: str, host: str, before: str) -> None:
    text = f"{before}{local}@{host}"
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "llama3.1:8b@q4",
        "llama3.1:8b@q4.gguf",
        "ollama/ollama:0.3.12@sha256:0123456789abcdef",
        "bob@example.com",
        "mailto:bob@example.com",
        "https://bob:***@hf.co/x",
        "carol:***@studio.local",
    ],
)
def test_honest_or_already_masked_text_stays(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("carol:TopSecretPW42@studio.local", "carol:***@studio.local"),
        ("('carol:P@ss:w0rd@studio.local')", "('carol:***@studio.local')"),
        ("host=carol:pw1234@10.0.0.5:8000/x", "host=carol:***@10.0.0.5:8000/x"),
        (":RedisPW9@cache.internal", ":***@cache.internal"),
        ("https://bob:LabelPW66@hf.co/x", "https://bob:***@hf.co/x"),
    ],
)
def test_named_cases(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_a_long_hostile_word_is_read_in_linear_time() -> None:
    """Each word is read once and each `@` in it looked at once (a quadratic pattern over a
    100 kB log line had stopped the ingest, see _URL_HEAD)."""
    for text in ("=a:" * 40_000 + "@x", "x:" + "@" * 200_000, "a:" + "@a.a.a.a-" * 20_000):
        started = time.perf_counter()
        redact(text)
        assert time.perf_counter() - started < 3


def test_a_stored_rows_run_and_difference_are_named_masked() -> None:
    """A row stored before the check (its host carol:TopSecretPW42@...) is named by later
    imports as 'the run already imported': masked before it is cut to length."""
    stored = {"timestamp": "2025-06-02T09:14:03+00:00", "host": "carol:TopSecretPW42@studio.local"}
    assert "TopSecretPW42" not in run_named(stored) and "carol:***@studio.local" in run_named(
        stored
    )
    said = first_difference({"x": "carol:TopSecretPW42@studio.local"}, {"x": "other"})
    assert said is not None and "TopSecret" not in said


def test_a_masked_query_value_keeps_its_closing_quote() -> None:
    """A skipped row's reason quotes its masked model ('...?api_key=***'): masked again for the
    line felab prints, the quote and what followed had gone with it."""
    said = "the model ('llama3.1:8b?api_key=***'): remove it"
    assert redact(said) == said
    assert redact("x?api_key=sk-LEAKME1234567890') y") == "x?api_key=*** y"

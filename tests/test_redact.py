"""felab_core.redact: a password in a URL is never shown, whatever it holds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from felab_core import redact as redact_module
from felab_core.redact import add_url_secrets, redact, url_as_typed_masked, url_password_masked


@pytest.fixture(autouse=True)
def no_secrets_of_earlier_tests() -> Iterator[None]:
    """The registry is the process's: a test before these (a URL `http://alice@host` whose bare
    user may be a password) had registered 'alice', and 9 of these then failed in CI's order."""
    kept = set(redact_module._secrets)
    redact_module._secrets.clear()
    redact_module.redact_cached.cache_clear()
    yield
    redact_module._secrets.clear()
    redact_module._secrets.update(kept)
    redact_module.redact_cached.cache_clear()


@pytest.mark.parametrize("password", ["plain", "S3cr/etPw", "p@ss:w0rd", "a#b?c", "x/y@z", "end/"])
def test_a_url_password_is_masked_whatever_it_holds(password: str) -> None:
    for url in (
        f"postgresql+psycopg://alice:{password}@127.0.0.1:5432/felab",
        f"http://alice:{password}@[::1]:8080",
    ):
        shown = redact(f"could not use the database at {url}: refused")
        assert password not in shown and "alice:***@" in shown, shown
        assert password not in url_as_typed_masked(url)


@pytest.mark.parametrize("password", ["S3cret Pw", "S3cr\tetPw", "a b/c#d"])
def test_a_url_as_typed_is_masked_even_when_it_cannot_be_parsed(password: str) -> None:
    url = f"http://alice:{password}@127.0.0.1:21000"
    assert url_as_typed_masked(url) == "http://alice:***@127.0.0.1:21000"
    assert url_as_typed_masked("http://127.0.0.1:21000/v1") == "http://127.0.0.1:21000/v1"


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("invalid api_key=sk-secret123 given", "invalid api_key=*** given"),
        ('{"token": "abcd1234"}', '{"token": "***"}'),
        ("Authorization: Bearer abcdef123", "Authorization: Bearer ***"),
        ("Bearer: S3cretPw", "Bearer: ***"),  # thirteenth sweep: the colon let it through
        ("token sk-secret123 expired", "token *** expired"),  # a short key in words
        ("password: hunter22", "password: ***"),
        ("bad key sk-abcdefghijklmnop1234", "bad key ***"),
        ("API-KEY:ZZZZZZZZZZZZZZZZZZZZ", "API-KEY:***"),
        ("invalid token hunter2pw", "invalid token ***"),  # thirteenth sweep: after a space
        # fourteenth sweep: after a word that only names a secret, any value is one
        ("db password=letmein", "db password=***"),
        ('{"password": "changeme"}', '{"password": "***"}'),
        ("Authorization: Bearer abcdefghij", "Authorization: Bearer ***"),
        ("Bearer xyzsecret", "Bearer ***"),
        ("api_key=sk_live_abc", "api_key=***"),
        ("PGPASSWORD=supersecret", "PGPASSWORD=***"),
        ("?x=1 token=abc", "?x=1 token=***"),
        ("wrong password  abc123xyz here", "wrong password  *** here"),
    ],
)
def test_a_secret_said_in_words_is_masked(said: str, shown: str) -> None:
    """A server's error text may repeat a key it holds (thirteenth sweep's brief: echoed)."""
    assert redact(said) == shown


@pytest.mark.parametrize(
    "prose",
    [
        "the first token: raise --timeout",
        "first token: 12.5 ms",
        "time per output token = (last token - first token)",
        "max_tokens=5 is low",
        "the token is wrong",
        "Bearer token",
        "the first token generation took long",
        "token p50 is 12 ms",
        "time per token 2.1e-05 s",
    ],
)
def test_prose_about_tokens_is_left_alone(prose: str) -> None:
    assert redact(prose) == prose


def test_a_json_answer_instead_of_a_stream_is_quoted_without_its_key() -> None:
    """Thirteenth sweep: the 'not streaming' message quoted the server's body raw."""
    from felab_core.engine.stream_shape import not_a_stream

    said = not_a_stream(b'{"error": {"message": "api_key=sk-secret123 invalid"}}', "")
    assert said is not None and "not streaming" in said
    assert "sk-secret123" not in said and "api_key=***" in said


def test_a_servers_error_text_never_repeats_its_key() -> None:
    from felab_core.engine.request_errors import server_error_message

    said = server_error_message(
        401, b'{"error": "Incorrect API key provided: api_key=sk-ab12cd34"}'
    )
    assert "sk-ab12cd34" not in said and "api_key=***" in said


@pytest.mark.parametrize("text", ["a" * 1_000_000, "a://:" * 200_000, "x://@" * 200_000])
def test_a_long_word_is_redacted_in_one_pass(text: str) -> None:
    """Fourteenth sweep: a 200,000-letter worker id in a log line held the ingest for two
    minutes (each letter began a URL search to the end of the word). A hang guard with a wide
    margin: linear, this is well under a second; it was minutes to an hour."""
    import time

    started = time.monotonic()
    redact(text)
    assert time.monotonic() - started < 10


def test_a_bare_user_in_a_url_is_masked_as_the_key_it_usually_is() -> None:
    """Eighteenth sweep (a2) H2: `http://hf_abc...@host` (an API key as the URL's user, no
    password) was printed whole in the /metrics note and written to the record's notes."""
    key = "hf_abcdefghijklmnopqrstuvwxyz123456"
    url = f"http://{key}@127.0.0.1:41234"
    assert url_password_masked(url) == "http://***@127.0.0.1:41234"
    assert url_password_masked(f"http://u%3Atok{key}@h:1/v1") == "http://***@h:1/v1"
    assert key not in redact(f"no server-side figures: {url}/metrics answered HTTP 404")
    assert url_password_masked("http://alice:pw@h:1") == "http://alice:***@h:1"  # as before
    assert url_password_masked("http://h:1/v1") == "http://h:1/v1"


def test_a_bare_user_is_masked_wherever_a_server_repeats_it() -> None:
    add_url_secrets("http://q9Zt4Lx0Pw7Rk2Mn@127.0.0.1:1/v1")
    assert redact("the key q9Zt4Lx0Pw7Rk2Mn was rejected") == "the key *** was rejected"


def test_a_bare_users_basic_header_is_masked_where_a_server_repeats_it() -> None:
    """Nineteenth sweep (a) H5: http://TOKEN@host is sent as Basic base64("TOKEN:"), and a
    server echoing that header had it stored unmasked in the error text."""
    import base64

    add_url_secrets("http://k7Jq2Wn9Xp4Lm1@127.0.0.1:1/v1")
    sent = base64.b64encode(b"k7Jq2Wn9Xp4Lm1:").decode()
    assert sent not in redact(f"unauthorized: Basic {sent} is not a key")


TOKENS = [
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz12345678",  # Hugging Face (hf_ + 34)
    "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2,  # GitHub
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123",
    "AKIAIOSFODNN7EXAMPLE",  # AWS access key id
    "xoxb-123456789012-1234567890123-abcdefABCDEF",  # Slack
    "MTEyMzQ1Njc4OTAxMjM0NTY3OA.GAbCdE.abcdefghijklmnopqrstuvwxyz0123456789",  # Discord bot
    "gsk_abcdefghijklmnopqrstuvwxyz123456",  # Groq
    "nvapi-abcdefghijklmnopqrstuvwxyz123456",  # NVIDIA
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("token", TOKENS)
def test_a_well_known_token_is_masked_by_its_shape(token: str) -> None:
    """Twentieth sweep, a2 A2-25: only sk-... keys were known; an hf_ token (the one gated Llama
    needs) or felab's own Discord bot token in a note was printed and saved with each run."""
    assert redact(f"see {token} and more") == "see *** and more"
    assert redact(f"http://10.0.0.1:8000/{token}/v1") == "http://10.0.0.1:8000/***/v1"


@pytest.mark.parametrize(
    "honest",
    [
        "meta-llama/Llama-3.1-8B-Instruct",
        "Qwen/Qwen2.5-7B-Instruct-AWQ at http://127.0.0.1:8000/v1",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "attempt 1c9e0a7b3f4d4e2a9b8c7d6e5f4a3b2c",
        "model-00001-of-00004.safetensors",
        "hf_transfer is on; HF_TOKEN is set; ghp_ and AKIA are prefixes",
        "gpu-node-01.cluster.example.edu:8000",
        "felab_core.engine.request_errors.server_error_message",
        "2026-12-05T23:13:20.123456+00:00 vLLM 0.9.0",
        "A1B2C3-D4E5F6-A7B8C9",
    ],
)
def test_honest_names_are_not_taken_for_tokens(honest: str) -> None:
    assert redact(honest) == honest


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "http://127.0.0.1:41234/sk-abcdefghijklmnopqrstuvwx12345/v1",
            "http://127.0.0.1:41234/***/v1",
        ),
        ("http://127.0.0.1:41002/api_key=SECRETabc123", "http://127.0.0.1:41002/api_key=***"),
        ("http://u:pw@h:1/sk-abcdefgh12345678", "http://u:***@h:1/***"),
        ("https://gw.example.com/openai/v1", "https://gw.example.com/openai/v1"),
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
    ],
)
def test_a_key_in_a_urls_path_is_masked_wherever_the_url_is_shown(url: str, shown: str) -> None:
    """Twentieth sweep, a2 A2-6 and c C30: a key in the path went whole into the record, the
    targets table and the size commands' errors. Both ways felab shows a URL mask it."""
    from felab_core.redact import url_without_credentials

    assert url_password_masked(url) == shown
    assert url_without_credentials(url) == shown.replace("u:***@", "")

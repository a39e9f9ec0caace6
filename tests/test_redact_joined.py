"""Twenty-second sweep (a) A4/A5/A6: one rule for a secret's name and its value, wherever the
text comes from (a URL's path, a targets file's note, a server's error text or redirect): the
name joined to its value by any separator, plural names, env-variable names and short prefixed
tokens. Honest text (model ids, paths, prose about tokens) stays as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from felab_core.redact import redact, url_password_masked, url_without_credentials

SECRET_PATHS = [
    ("/secret-S3A", "/secret-***"),
    ("/api-key-S20A", "/api-key-***"),
    ("/bearer%20S5A", "/bearer%20***"),
    ("/Bearer%20BEARTOK99", "/Bearer%20***"),
    ("/tokens/S12A", "/tokens/***"),
    ("/secrets/abcdef", "/secrets/***"),
    ("/api_key_V2xk", "/api_key_***"),
    ("/token:abcdef", "/token:***"),
    ("/key+abcdef", "/key+***"),
    ("/password%3Dabcdef", "/password%3D***"),
    ("/hf_ABCDEFGHIJKLMNOPQRSTUV", "/***"),
]


@pytest.mark.parametrize(("path", "masked"), SECRET_PATHS)
def test_a_secret_joined_to_its_name_in_a_path_is_masked(path: str, masked: str) -> None:
    url = f"http://127.0.0.1:41020{path}/v1"
    for shown in (url_without_credentials(url), url_password_masked(url), redact(url)):
        assert shown == f"http://127.0.0.1:41020{masked}/v1", shown


SAID = [
    ("OPENAI_API_KEY=NOTEO9", "OPENAI_API_KEY=***"),
    ("export HF_TOKEN=abc", "export HF_TOKEN=***"),
    ("DB_PW: letmein", "DB_PW: ***"),
    ("openai_api_key=xyz1", "openai_api_key=***"),
    ("api key: NOTEK3", "api key: ***"),
    ("pw: NOTEPW2", "pw: ***"),
    ("my password is hunter2xyz", "my password is ***"),
    ("passphrase NOTEPP10", "passphrase ***"),
    ("secret-NOTES5", "secret-***"),
    ("key NOTEKK11", "key ***"),
    ("auth failed for OPENAI_API_KEY=ERRKEY4", "auth failed for OPENAI_API_KEY=***"),
    ("bad key secret-ERRS6, hf_shortERR7", "bad key ***, ***"),
    ("sent Bearer%20BEARTOK99", "sent Bearer%20***"),
    (
        "moved to http://127.0.0.1:41020/secret-REDIR3/x",
        "moved to http://127.0.0.1:41020/secret-***/x",
    ),
]


@pytest.mark.parametrize(("said", "shown"), SAID)
def test_a_secret_said_in_any_of_the_usual_shapes_is_masked(said: str, shown: str) -> None:
    assert redact(said) == shown


@pytest.mark.parametrize(
    "honest",
    [
        "meta-llama/Llama-3-8B",
        "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF",
        "http://127.0.0.1:8000/v1/chat/completions",
        "http://127.0.0.1:11434/api/generate",
        "http://h/token-level/x and http://h/pass_through/x",
        "the prompt is 512 tokens; max_tokens=512 exceeded",
        "tokens: 512",
        "one passage typed at the keyboard",
        "token-level batching, api-key-based auth",
        "the password is required",
        "HF_TOKEN is set; hf_transfer is on; hf_hub_download",
        "cache_key=abc",
        "secret-llama-7b, token_2b_model, api_key_v2, prompt_per_token_ms",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "123e4567-e89b-12d3-a456-426614174000",
    ],
)
def test_honest_text_stays_as_written(honest: str) -> None:
    assert redact(honest) == honest


def test_a_note_s_secret_is_masked_in_every_usual_shape(tmp_path: Path) -> None:
    from felab_core.engine.targets import load_targets

    path = tmp_path / "t.toml"
    notes = [said for said, _ in SAID[:10]]
    path.write_text(
        "".join(
            f'[targets.t{i}]\nkind = "vllm"\nurl = "http://127.0.0.1:1"\nnote = "{note}"\n'
            for i, note in enumerate(notes)
        )
    )
    targets = load_targets(path)
    for i, (_, shown) in enumerate(SAID[:10]):
        assert targets[f"t{i}"].note == shown


def test_a_server_s_error_text_is_masked() -> None:
    from felab_core.engine.request_errors import server_error_message

    body = b'{"error": {"message": "auth failed for OPENAI_API_KEY=ERRKEY4 secret-ERRS6"}}'
    said = server_error_message(500, body)
    assert "ERRKEY4" not in said and "ERRS6" not in said, said
    assert "OPENAI_API_KEY=***" in said


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a,b", "holds ','"),
        ("x y", "holds ' '"),
        ("x[/y]", "holds '\\['"),
        ("token=NAMETOK2", "'token=\\*\\*\\*' looks like a key"),
        ("OPENAI_API_KEY=NK3", "'OPENAI_API_KEY=\\*\\*\\*' looks like a key"),
        ("sk-NAMEKEY1234567890abcdef", "'\\*\\*\\*' looks like a key"),
    ],
)
def test_a_target_name_outside_the_rule_is_refused(tmp_path: Path, name: str, message: str) -> None:
    """Twenty-second sweep (a) A13: "use letters, digits, - and _" was advised, but `a,b` and a
    key as a name were taken and written verbatim to the CSV and the record."""
    from felab_core.engine.targets import TargetError, load_targets

    path = tmp_path / "t.toml"
    path.write_text(f'[targets."{name}"]\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n')
    with pytest.raises(TargetError, match=message) as refused:
        load_targets(path)
    assert "NAMETOK2" not in str(refused.value) and "NK3" not in str(refused.value)
    path.write_text('[targets.gpu-box_2]\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n')
    assert "gpu-box_2" in load_targets(path)


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic ***"),
        ("Cookie: session=abc123def456", "Cookie: ***"),
        ("Set-Cookie: sid=xyz; Path=/", "Set-Cookie: ***; Path=/"),
    ],
)
def test_basic_credentials_and_cookies_are_masked(said: str, shown: str) -> None:
    """Twenty-second sweep (a2) A2-10: a targets note's Basic credentials and session cookie
    were shown, stored and printed as typed."""
    assert redact(said) == shown


@pytest.mark.parametrize("prose", ["Basic usage of felab", "Basic configuration", "cookies jar"])
def test_prose_with_basic_or_cookie_stays(prose: str) -> None:
    assert redact(prose) == prose

"""A secret carried in a URL's path after a secret-named segment (`/key=V`, `/bearer/V`) is
masked wherever felab shows or stores the URL; honest paths stay as they are."""

from __future__ import annotations

import pytest

from felab_core.redact import redact, url_password_masked, url_without_credentials

SECRET_PATHS = [
    "/key=V1sekrit",
    "/auth=V2sekrit",
    "/pwd=V3sekrit",
    "/pass=V4sekrit",
    "/password/V4sekrit",
    "/x-api-key/V5sekrit",
    "/bearer/V6sekrit",
    "/Bearer=V6sekrit",
    "/token/V7sekrit",
    "/access_token=V8sekrit",
    "/apikey/V9sekrit",
    "/api-key=V9sekrit",
    "/sig=V10sekrit",
    "/signature/V11sekrit",
    "/credential=V12sekrit",
    "/secret/V13sekrit",
    "/key%3DV14sekrit",
]


@pytest.mark.parametrize("path", SECRET_PATHS)
def test_a_value_after_a_secret_named_path_segment_is_masked(path: str) -> None:
    url = f"http://gw.example:8000{path}/v1"
    for shown in (url_without_credentials(url), url_password_masked(url), redact(url)):
        assert "sekrit" not in shown, shown
        assert shown.endswith("***/v1"), shown


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/v1/completions",
        "/api/generate",
        "/api/chat",
        "/v1/models/meta-llama/Llama-3.1-8B-Instruct",
        "/blobs/sha256/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "/keys/list",
        "/passage/one",
        "/authors/x",
        "/tokenize",
    ],
)
def test_honest_paths_are_left_alone(path: str) -> None:
    url = f"http://gw.example:8000{path}"
    assert url_without_credentials(url) == url
    assert redact(url) == url


def test_a_host_named_like_a_secret_is_not_a_path_segment() -> None:
    assert redact("http://token/v1/models") == "http://token/v1/models"


def test_more_query_names_are_masked() -> None:
    shown = url_without_credentials("http://h/v1?sig=abc123&x-api-key=def456&n=1")
    assert "abc123" not in shown and "def456" not in shown and shown.endswith("&n=1")

"""felab_core.redact: a password in a URL is never shown, whatever it holds."""

from __future__ import annotations

import pytest

from felab_core.redact import redact, url_as_typed_masked


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

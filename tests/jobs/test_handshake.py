"""The pairing handshake (felab_core.jobs.handshake): what proves a request came from the code's
holder, and what only that holder can open."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from felab_core.errors import Forbidden, Invalid
from felab_core.jobs.handshake import (
    answer_id,
    check_request,
    code_secret,
    lookup_of,
    make_request,
    open_sealed,
    seal,
)
from felab_core.jobs.keys import Identity, new_private_key, sign

CODE = "A1B2C3-D4E5F6-0A1B2C"


def test_the_code_never_travels_and_the_request_proves_it() -> None:
    key = new_private_key()
    request = make_request(CODE, key, {"mlx": "mlx"})
    text = json.dumps(request)
    assert CODE not in text and CODE.lower() not in text
    assert code_secret(CODE) not in text  # not even what the database keeps
    assert request["lookup"] == lookup_of(code_secret(CODE))
    check_request(request, code_secret(CODE))
    check_request(request, code_secret(" a1b2c3-d4e5f6-0a1b2c "))  # as typed, any case


def test_a_copied_request_cannot_carry_another_key_or_other_targets() -> None:
    request = make_request(CODE, new_private_key(), {"mlx": "mlx"})
    thief = new_private_key()
    swapped = {k: v for k, v in request.items() if k != "sig"}
    swapped["public_key"] = Identity(0, "x", thief).public_key
    with pytest.raises(Forbidden, match="does not match its code"):
        check_request(sign(swapped, thief), code_secret(CODE))
    more = {k: v for k, v in request.items() if k != "sig"} | {"targets": {"gpu": "vllm"}}
    with pytest.raises(Forbidden):
        check_request(more, code_secret(CODE))
    with pytest.raises(Forbidden):
        check_request(request, code_secret("OTHER-CODE-123456"))
    assert answer_id(request) != answer_id(swapped)  # each request its own answer


def test_only_the_codes_holder_opens_the_answer() -> None:
    answer = {"worker_id": 7, "name": "mac", "broker_password": "s3cret"}
    sealed = seal(code_secret(CODE), answer)
    assert "s3cret" not in sealed
    assert open_sealed(CODE, sealed) == answer
    with pytest.raises(Invalid):
        open_sealed("B1B2C3-D4E5F6-0A1B2C", sealed)


@given(st.text(max_size=300))
def test_any_garbage_for_an_answer_is_a_clear_error(text: str) -> None:
    with pytest.raises(Invalid, match="pair again"):
        open_sealed(CODE, text)


def test_a_code_typed_in_lower_case_or_without_dashes_is_the_same_code() -> None:
    """Ninth sweep: '3f9a1c77b2e00d4e21' was 'not a pairing code'."""
    from felab_core.jobs.handshake import check_code_shape, code_secret

    shown = "3F9A1C-77B2E0-0D4E21"
    for typed in ("3f9a1c77b2e00d4e21", " 3f9a1c-77b2e0-0d4e21 ", "3F9A1C 77B2E0 0D4E21"):
        check_code_shape(typed)
        assert code_secret(typed) == code_secret(shown)

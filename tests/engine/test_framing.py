"""SSE and NDJSON framing: exact parsing, split-invariance, and no exception on any bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from felab_core.engine.framing import Frame, NDJSONDecoder, SSEDecoder


def feed_all(decoder: SSEDecoder | NDJSONDecoder, pieces: list[bytes]) -> list[Frame]:
    frames: list[Frame] = []
    for piece in pieces:
        frames.extend(decoder.feed(piece))
    return frames


def test_sse_events_comments_and_multiline_data() -> None:
    body = (
        b": keepalive 1\n\n"
        b'data: {"a": 1}\n\n'
        b"event: ping\ndata: line one\ndata: line two\n\n"
        b"data:no-space\r\n\r\n"
        b"id: 7\nretry: 10\ndata: [DONE]\n\n"
    )
    dec = SSEDecoder()
    frames = dec.feed(body)
    assert [f.data for f in frames] == [
        '{"a": 1}',
        "line one\nline two",
        "no-space",
        "[DONE]",
    ]
    assert frames[1].event == "ping"
    assert dec.comments == 1
    assert dec.close() is None


def test_sse_crlf_split_between_reads_is_not_a_blank_line() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: x\r") == []
    assert dec.feed(b"\n") == []
    assert dec.feed(b"\r\n") == [Frame("x")]


def test_sse_lone_cr_line_endings() -> None:
    dec = SSEDecoder()
    # A CR ends its line at once (test_framing_cr: held back, an event came a read late).
    assert [f.data for f in dec.feed(b"data: a\r\rdata: b\r\r")] == ["a", "b"]
    assert [f.data for f in dec.feed(b"data: c\n\n")] == ["c"]


def test_a_lone_cr_closing_the_last_event_at_the_end_is_that_event() -> None:
    """Eleventh sweep: `data: [DONE]\\r\\r` ending the body was held back for an LF that never
    came, and lost: the run read "the stream ended without its final message"."""
    dec = SSEDecoder()
    assert [f.data for f in dec.feed(b"data: a\r\rdata: [DONE]\r\r")] == ["a", "[DONE]"]
    assert dec.close() is None


def test_sse_event_without_closing_blank_line_is_returned_by_close() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: partial") == []
    assert dec.close() == Frame("partial")


def test_ndjson_lines_and_unterminated_tail() -> None:
    dec = NDJSONDecoder()
    assert [f.data for f in dec.feed(b'{"a":1}\n\n{"b":2}\r\n{"c"')] == ['{"a":1}', '{"b":2}']
    assert dec.close() == Frame('{"c"')


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    out, last = [], 0
    for p in points:
        out.append(data[last:p])
        last = p
    out.append(data[last:])
    return out


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=12))
def test_sse_never_raises_and_is_split_invariant(data: bytes, cuts: list[int]) -> None:
    whole = SSEDecoder()
    expected = whole.feed(data)
    pieces = SSEDecoder()
    got = feed_all(pieces, _splits(data, cuts))
    assert got == expected
    assert whole.close() == pieces.close()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=12))
def test_ndjson_never_raises_and_is_split_invariant(data: bytes, cuts: list[int]) -> None:
    whole = NDJSONDecoder()
    expected = whole.feed(data)
    got = feed_all(NDJSONDecoder(), _splits(data, cuts))
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
            max_size=30,
        ),
        max_size=8,
    ),
    st.lists(st.integers(0, 500), max_size=10),
)
def test_sse_round_trips_any_data_lines(values: list[str], cuts: list[int]) -> None:
    body = b"".join(b"data: " + v.encode() + b"\n\n" for v in values)
    frames = feed_all(SSEDecoder(), _splits(body, cuts))
    # An event whose only data line is empty still counts as data ("").
    assert [f.data for f in frames] == values


def test_a_leading_byte_order_mark_is_not_part_of_the_first_field() -> None:
    """Twentieth sweep (a) A04: a stream opening with U+FEFF lost its first event (the field
    read as "\\ufeffdata"), and the first token's time was taken from the second."""
    body = "\ufeffdata: a\n\ndata: b\n\n".encode()
    for cut in range(len(body) + 1):
        frames = feed_all(SSEDecoder(), [body[:cut], body[cut:]])
        assert [f.data for f in frames] == ["a", "b"], cut
    later = "data: a\n\n\ufeffdata: b\n\n".encode()  # only the stream's first one is stripped
    assert [f.data for f in feed_all(SSEDecoder(), [later])] == ["a"]

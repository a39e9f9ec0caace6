"""A tiny OpenAI-chat server whose answer comes in bursts, for the tests of bursts.burst_of:
`groups` of (messages, tokens a message) are each written in ONE socket write, `gap_s` apart;
a server sending its answer whole is one group (twenty-second sweep's srv/fake.py, mode
`instant`, ported: the scripted server writes each message apart, and sharing the test's
process, its messages can land 100 µs apart on a busy box). The answer starts `first_s` after
the request: 3,000 tokens sent whole in under 30 ms are faster than any one stream (bench fails
such an answer as a cache's), which a quiet machine reached with the 3 ms it had waited."""

from __future__ import annotations

import json
import socket
import threading
import time


class BurstServer:
    def __init__(
        self, groups: list[tuple[int, int]], gap_s: float = 0.0, first_s: float = 0.05
    ) -> None:
        self.groups, self.gap_s, self.first_s = groups, gap_s, first_s
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def tokens(self) -> int:
        return sum(n * k for n, k in self.groups)

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                got = conn.recv(65536)
                if not got:
                    return
                head += got
            top, _, body = head.partition(b"\r\n\r\n")
            length = next(
                (
                    int(h.split(b":")[1])
                    for h in top.split(b"\r\n")
                    if h.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:
                body += conn.recv(65536)
            if not top.startswith(b"POST"):
                conn.sendall(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                return
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            )
            time.sleep(self.first_s)
            for g, (messages, per) in enumerate(self.groups):
                if g:
                    time.sleep(self.gap_s)
                conn.sendall(b"".join(_event({"content": "w " * per}) for _ in range(messages)))
            n = self.tokens()
            usage = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}
            tail = (
                _event({}, "length") + _sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n"
            )
            conn.sendall(tail)

    def stop(self) -> None:
        self._stop = True
        self.sock.close()


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _event(delta: dict[str, str], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return _sse({"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [choice]})

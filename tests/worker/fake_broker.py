"""A server at the broker's address that speaks Redis's protocol but is not Redis: each test
says how it answers. Real sockets on 127.0.0.1, an ephemeral port, closed at the end."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: How the fake answers one command: its arguments (the first upper-cased) and the number of
#: the connection (0 for the first) to the bytes it sends; None closes the connection.
Answer = Callable[[list[bytes], int], bytes | None]


def handshake_or(answer: Answer) -> Answer:
    """`answer` behind what redis-py sends on connecting (CLIENT SETINFO, SELECT, AUTH; HELLO
    refused, as a server without RESP3 does)."""

    def answering(args: list[bytes], conn: int) -> bytes | None:
        if args[0] in (b"CLIENT", b"SELECT", b"AUTH"):
            return b"+OK\r\n"
        if args[0] == b"HELLO":
            return b"-ERR unknown command 'HELLO'\r\n"
        return answer(args, conn)

    return answering


def _commands(conn: socket.socket) -> Iterator[list[bytes]]:
    reader = conn.makefile("rb")
    while True:
        head = reader.readline()
        if not head.startswith(b"*"):
            return
        args = []
        for _ in range(int(head[1:])):
            size = int(reader.readline()[1:])
            args.append(reader.read(size + 2)[:-2])
        args[0] = args[0].upper()
        yield args


@contextmanager
def fake_broker(
    answer: Answer,
    *,
    drip_s: float = 0.0,
    dripped: Callable[[list[bytes], int], bool] = lambda args, conn: True,
) -> Iterator[str]:
    """A fake broker's URL; with `drip_s`, the answers `dripped` picks (command, connection)
    are sent one byte at a time, `drip_s` apart: each read well within a timeout, the whole
    answer not."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()
    count = [0]

    def serve(conn: socket.socket, number: int) -> None:
        with conn:
            try:
                for args in _commands(conn):
                    said = answer(args, number)
                    if said is None or stop.is_set():
                        return
                    if not drip_s or not dripped(args, number):
                        conn.sendall(said)
                        continue
                    for byte in said:
                        conn.sendall(bytes([byte]))
                        time.sleep(drip_s)
            except (OSError, ValueError):
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn, count[0]), daemon=True).start()
            count[0] += 1

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    finally:
        stop.set()
        server.close()


def everything(reply: bytes) -> Answer:
    """PING answered +PONG, every other command with `reply`."""
    return handshake_or(lambda args, conn: b"+PONG\r\n" if args[0] == b"PING" else reply)

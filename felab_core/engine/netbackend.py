"""A lean asyncio network backend for httpcore, so httpx's stack keeps up with hundreds of streams.

httpcore's default (anyio) stream pauses and resumes the socket's reader around every read: two
epoll_ctl calls and an extra event-loop pass per chunk. At 256 streams of 50 chunks/s that was
the difference between stamping a chunk when it arrived and stamping it milliseconds later.
This backend reads the socket itself; HTTP parsing, pooling and the trace hooks stay httpx's
and httpcore's.

On Linux it also asks the kernel to stamp every received segment (SO_TIMESTAMPNS). A chunk's
arrival time is then when the kernel got it, not when a busy event loop got round to it: with
256 streams whose chunks land in the same millisecond, the last one in the burst is otherwise
stamped as late as the loop is behind. Elsewhere, and over TLS, arrival is stamped on read.
"""

from __future__ import annotations

import asyncio
import collections
import select
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager, nullcontext, suppress
from typing import Any

import httpcore
import httpx

READ_LIMIT = 1 << 20
READ_SIZE = 1 << 16
RX_STAMP_INFO = "felab_rx_ns"  # get_extra_info key: kernel arrival of the last read, monotonic ns

# Linux: SO_TIMESTAMPNS (35); the control message carries a struct timespec on CLOCK_REALTIME.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
_KERNEL_STAMPS = sys.platform.startswith("linux")


def _deadline(timeout: float | None) -> AbstractAsyncContextManager[Any]:
    return asyncio.timeout(timeout) if timeout is not None else nullcontext()


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with _deadline(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout(f"no data for {timeout} s") from None
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with _deadline(timeout):
                self._writer.write(buffer)
                await self._writer.drain()
        except TimeoutError:
            raise httpcore.WriteTimeout(f"could not send within {timeout} s") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        self._writer.close()
        with suppress(OSError, ssl.SSLError):
            await self._writer.wait_closed()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with _deadline(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"TLS handshake took over {timeout} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        sock: socket.socket | None = self._writer.get_extra_info("socket")
        if info == "is_readable":
            return _is_readable(sock)
        if info == "socket":
            return sock
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        return None


def _is_readable(sock: socket.socket | None) -> bool:
    # An idle keep-alive socket that is readable has been closed by the server.
    if sock is None or sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class _Receiver:
    """One thread that reads every stamped socket the moment data arrives.

    Reading in the event loop ties the read to the loop's schedule: when 256 streams end at once
    and the loop spends 150 ms sending the next 256 requests, a stream's first and second chunks
    wait in the socket together and one read gets one stamp for both. This thread needs the GIL
    only for a recvmsg and a queue append, gets it within the interpreter's switch interval
    (5 ms), and hands each piece over with its own kernel stamp.
    """

    def __init__(self) -> None:
        self._poller = select.epoll()
        self._streams: dict[int, StampedSocketStream] = {}
        self._lock = threading.Lock()
        thread = threading.Thread(target=self._run, name="felab-receiver", daemon=True)
        thread.start()

    def register(self, stream: StampedSocketStream) -> None:
        with self._lock:
            self._streams[stream.fd] = stream
            with suppress(OSError, ValueError):
                self._poller.register(stream.fd, select.EPOLLIN)

    def unregister(self, fd: int) -> None:
        with self._lock:
            self._streams.pop(fd, None)
            with suppress(OSError, ValueError):
                self._poller.unregister(fd)

    def _run(self) -> None:
        while True:
            for fd, _mask in self._poller.poll(0.5):
                stream = self._streams.get(fd)
                if stream is not None:
                    stream.on_readable()


_receiver: _Receiver | None = None
_receiver_lock = threading.Lock()


def _the_receiver() -> _Receiver:
    global _receiver
    with _receiver_lock:
        if _receiver is None:
            _receiver = _Receiver()
        return _receiver


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class StampedSocketStream(httpcore.AsyncNetworkStream):
    """A plain TCP stream read ahead by the receiver thread, each read with its arrival stamp.

    `read` hands out one received piece at a time, so a consumer that falls behind still sees
    every piece with its own stamp. Writes go through the event loop as usual.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.fd = sock.fileno()
        self._loop = asyncio.get_running_loop()
        self.rx_ns: int | None = None
        self._pieces: collections.deque[tuple[bytes, int]] = collections.deque()
        # Written by one thread each, so neither needs a lock: queued = received - consumed.
        self._received = 0
        self._consumed = 0
        self._eof = False
        self._error: OSError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._reading = False
        self._switch = threading.Lock()
        self._closed = False
        self._stamping = False
        if _KERNEL_STAMPS:
            try:
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                self._stamping = True
            except OSError:
                self._stamping = False
        self._receiver = _the_receiver()
        self._resume()

    def _resume(self) -> None:
        with self._switch:
            if not self._reading and not self._eof and self._error is None and not self._closed:
                self._reading = True
                self._receiver.register(self)

    def _pause(self) -> None:
        # The receiver thread pauses, the loop resumes: one lock keeps `_reading` equal to
        # "registered with the receiver" (a pause racing a resume left a stream unregistered
        # but marked as reading, and nothing ever read it again).
        with self._switch:
            if self._reading:
                self._reading = False
                self._receiver.unregister(self.fd)

    def on_readable(self) -> None:
        """Runs on the receiver thread."""
        try:
            data, stamp = self._recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._error = exc
            self._pause()
        else:
            if data:
                self._pieces.append((data, stamp))
                self._received += len(data)
                if self._received - self._consumed > READ_LIMIT:
                    self._pause()  # back-pressure: the consumer is far behind
            else:
                self._eof = True
                self._pause()
        waiter = self._waiter
        if waiter is not None:
            with suppress(RuntimeError):  # the loop has closed: nobody is waiting any more
                self._loop.call_soon_threadsafe(_wake, waiter)

    def _recv(self, max_bytes: int) -> tuple[bytes, int]:
        if not self._stamping:
            data = self._sock.recv(max_bytes)
            return data, time.monotonic_ns()
        data, ancillary, _flags, _addr = self._sock.recvmsg(max_bytes, 64)
        mono = time.monotonic_ns()
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= 16:
                sec, nsec = _TIMESPEC.unpack_from(payload)
                # Realtime to monotonic with the offset read now; never later than "now".
                offset = time.time_ns() - time.monotonic_ns()
                return data, min(mono, sec * 1_000_000_000 + nsec - offset)
        return data, mono

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with _deadline(timeout):
                while not self._pieces:
                    if self._error is not None:
                        raise self._error
                    if self._eof:
                        return b""
                    if not self._reading:  # paused for back-pressure, since drained: wake it
                        self._resume()
                    waiter = self._waiter = self._loop.create_future()
                    # Data that landed between the check above and now would find no waiter.
                    if self._pieces or self._eof or self._error is not None:
                        waiter.set_result(None)
                    try:
                        await waiter
                    finally:
                        self._waiter = None
        except TimeoutError:
            raise httpcore.ReadTimeout(f"no data for {timeout} s") from None
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc
        data, stamp = self._pieces.popleft()
        if len(data) > max_bytes:
            self._pieces.appendleft((data[max_bytes:], stamp))
            data = data[:max_bytes]
        self._consumed += len(data)
        self.rx_ns = stamp
        if not self._reading and self._received - self._consumed <= READ_LIMIT // 2:
            self._resume()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with _deadline(timeout):
                await self._loop.sock_sendall(self._sock, buffer)
        except TimeoutError:
            raise httpcore.WriteTimeout(f"could not send within {timeout} s") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        self._closed = True
        self._pause()
        self._sock.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # TLS needs asyncio's transport: hand the socket over and stamp arrivals on read.
        self._pause()
        reader, writer = await asyncio.open_connection(sock=self._sock, limit=READ_LIMIT)
        return await AsyncioStream(reader, writer).start_tls(ssl_context, server_hostname, timeout)

    def get_extra_info(self, info: str) -> Any:
        if info == RX_STAMP_INFO:
            return self.rx_ns if self._stamping else None
        if info == "is_readable":
            return _is_readable(self._sock)
        if info == "socket":
            return self._sock
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        return None


async def _connect_socket(host: str, port: int, local_address: str | None) -> socket.socket:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    last: OSError | None = None
    for family, kind, proto, _name, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if local_address:
                sock.bind((local_address, 0))
            await loop.sock_connect(sock, address)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
        except BaseException:
            sock.close()
            raise
    raise last or OSError(f"no address for {host}")


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with _deadline(timeout):
                sock = await _connect_socket(host, port, local_address)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection within {timeout} s") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        for option in socket_options or ():
            sock.setsockopt(*option)
        return StampedSocketStream(sock)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with _deadline(timeout):
                reader, writer = await asyncio.open_unix_connection(path, limit=READ_LIMIT)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection within {timeout} s") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class LeanTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport with the pool rebuilt on the asyncio backend."""

    def __init__(self, *, limits: httpx.Limits, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=AsyncioBackend(),
        )

"""A lean asyncio network backend for httpcore, so httpx's stack keeps up with hundreds of streams.

httpcore's default (anyio) stream pauses and resumes the socket's reader around every read: two
epoll_ctl calls and an extra event-loop pass per chunk. At 256 streams of 50 chunks/s that was
the difference between stamping a chunk when it arrived and stamping it milliseconds later.
This backend reads from asyncio's own buffered stream instead; HTTP parsing, pooling and the
trace hooks stay httpx's and httpcore's.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager, nullcontext, suppress
from typing import Any

import httpcore
import httpx

READ_LIMIT = 1 << 20


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
            # An idle keep-alive socket that is readable has been closed by the server.
            if sock is None:
                return True
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        if info == "socket":
            return sock
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        try:
            async with _deadline(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=local, limit=READ_LIMIT
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection within {timeout} s") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        sock = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(reader, writer)

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

"""A TCP proxy the tests put between a process and a server, to cut its connections: while
cut, every connection through it is closed and new ones are closed as soon as they are
accepted (the client sees its connection reset, as behind a restarting load balancer);
while dropping, connections stay open and every byte is swallowed both ways (an answer
sent then is lost); restored, it forwards again. ``async with TcpProxy(target)`` listens
on ``proxy.target``."""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

CHUNK = 64 * 1024


class TcpProxy:
    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.cut_off = False
        self.dropping = False
        self.target = ""

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.target = f"127.0.0.1:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        for pipe in set(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    def cut(self) -> None:
        """Close every connection through the proxy, and every new one until ``restore``."""
        self.cut_off = True
        for writer in set(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def drop(self) -> None:
        """Keep every connection open, but let no byte through either way until
        ``restore`` (or ``cut``)."""
        self.dropping = True

    def restore(self) -> None:
        self.cut_off = False
        self.dropping = False

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        pipes = {
            asyncio.create_task(_pipe(reader, up_writer, self)),
            asyncio.create_task(_pipe(up_reader, writer, self)),
        }
        self._pipes |= pipes
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            self._pipes -= pipes
            for end in (writer, up_writer):
                self._writers.discard(end)
                end.transport.abort()


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, proxy: TcpProxy
) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(CHUNK):
            if proxy.dropping:
                continue  # swallowed
            writer.write(data)
            await writer.drain()

"""A TCP proxy in front of a server (PostgreSQL for one chaos replica, NATS for a test)
which can cut its clients off the way a network partition does: bytes stop flowing both
ways, and nothing is closed (no FIN, no RST) until the cut is healed, when what was held is
delivered as TCP retransmission would deliver it (a server's "terminating connection" and
its close included).

It listens on 127.0.0.1 and opens one upstream connection per client connection: to a
Unix socket (the chaos cluster's PostgreSQL listens on one only) or a TCP port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from devstack.embedded.postgres import PG_SUPERUSER

CHUNK = 65536
Upstream = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


class BlackHoleProxy:
    """``url(db)`` is the proxied server; ``cut()`` and ``heal()`` stop and restart the
    flow of every connection through it (those opened during a cut too)."""

    def __init__(self, upstream: Upstream) -> None:
        self._upstream = upstream
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self.port = 0

    def postgres_url(self, database: str) -> str:
        return f"postgresql://{PG_SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def cut_off(self) -> bool:
        return not self._flowing.is_set()

    def cut(self) -> None:
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.heal()
        if self._server is not None:
            self._server.close()
            self._server = None
        for pump in list(self._pumps):
            pump.cancel()
        for pump in list(self._pumps):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await self._upstream()
        except OSError:  # the server is down (a restart fault): the client sees a refusal
            writer.close()
            return
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            pump = asyncio.create_task(self._pump(source, sink), name="pg-proxy-pump")
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Forwards what ``source`` sends while the flow is on. Reading never stops: what
        arrives during a cut waits here, as it would in the kernels' buffers, so that
        neither end is ever blocked writing (a blocked PostgreSQL backend would ignore its
        timeouts until the cut healed, which no real network does past TCP's timeouts)."""
        held: asyncio.Queue[bytes] = asyncio.Queue()
        reading = asyncio.create_task(_read_all(source, held), name="pg-proxy-read")
        try:
            while data := await held.get():
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            reading.cancel()
            await self._flowing.wait()  # an end seen during a cut is held as well
            sink.close()


async def _read_all(source: asyncio.StreamReader, held: asyncio.Queue[bytes]) -> None:
    """Everything ``source`` sends into ``held``, then b"" for its end."""
    try:
        while data := await source.read(CHUNK):
            held.put_nowait(data)
    except (ConnectionError, OSError):
        pass
    finally:
        held.put_nowait(b"")


def unix_socket_of(socket_dir: Callable[[], Path]) -> Upstream:
    """PostgreSQL's socket file in ``socket_dir()``, looked up per connection (a restarted
    server may have chosen another directory)."""

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        found = [p for p in socket_dir().glob(".s.PGSQL.*") if not p.name.endswith(".lock")]
        if not found:
            raise OSError("no PostgreSQL socket")
        return await asyncio.open_unix_connection(str(found[0]))

    return connect


def tcp_port(host: str, port: int) -> Upstream:
    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(host, port)

    return connect

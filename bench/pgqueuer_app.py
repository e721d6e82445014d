"""pgqueuer's worker for ``bench.peers``: one no-op entrypoint, every setting at its default
(durable tables, batches of 10, completions buffered up to 0.1 s).

    BENCH_PEER_DSN=postgresql://... python -m bench.pgqueuer_app

It runs through ``pgqueuer.run`` on uvloop, which is what ``pgq run`` does: the 1.6.0 CLI
itself stops at start-up (its logger setup reads ``.name`` of a level given as a string),
so this module's ``__main__`` stands in for it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pgqueuer
import uvloop
from pgqueuer import AsyncpgDriver, Job, PgQueuer

TASK = "noop"


@asynccontextmanager
async def create_pgqueuer() -> AsyncIterator[PgQueuer]:
    """The factory ``pgq run`` takes: one connection, one entrypoint."""
    connection = await asyncpg.connect(os.environ["BENCH_PEER_DSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint(TASK)
    async def noop(job: Job) -> None:
        return None

    try:
        yield pgq
    finally:
        await connection.close()


if __name__ == "__main__":
    uvloop.run(pgqueuer.run("bench.pgqueuer_app:create_pgqueuer"))

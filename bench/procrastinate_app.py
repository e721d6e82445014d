"""procrastinate's app for ``bench.peers``: one no-op task, every setting at its default
(LISTEN/NOTIFY with a 5 s polling fallback, jobs kept). The bench runs its workers at
several concurrencies in turn (``--concurrency``; 1, one job at a time, is the default),
each on a database of its own.

    BENCH_PEER_DSN=postgresql://... python -m procrastinate --app=bench.procrastinate_app.app \
        worker --concurrency 1
"""

from __future__ import annotations

import os

import procrastinate

TASK = "noop"

# psycopg takes the same libpq URL (the socket directory as ?host=). The pool opens only
# with the app, so importing this module without the variable still works (bench.peers
# itself enqueues through it with the connector replaced by one to each run's database).
app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("BENCH_PEER_DSN", ""))
)


@app.task(name=TASK)
async def noop() -> None:
    return None

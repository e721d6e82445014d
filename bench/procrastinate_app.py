"""procrastinate's app for ``bench.peers``: one no-op task, every setting at its default
(one job at a time per worker, LISTEN/NOTIFY with a 5 s polling fallback, jobs kept).

    BENCH_PEER_DSN=postgresql://... python -m procrastinate --app=bench.procrastinate_app.app worker
"""

from __future__ import annotations

import os

import procrastinate

TASK = "noop"

# psycopg takes the same libpq URL (the socket directory as ?host=). The pool opens only
# with the app, so importing this module without the variable still works.
app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("BENCH_PEER_DSN", ""))
)


@app.task(name=TASK)
async def noop() -> None:
    return None

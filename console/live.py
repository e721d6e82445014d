"""Live parts of a page: Server-Sent Events that ``static/console.js`` swaps into the page.

A re-rendered view (the jobs table, the overview) sends its HTML when it changed; a refused
call ends the stream with ``signed-out``; a stream ends after ``max_s`` and the browser's
EventSource reconnects by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from durable_jobs_client import JobsError
from starlette.responses import StreamingResponse

from console.backend import signed_out

# A live stream ends after this long; the browser's EventSource reconnects by itself.
STREAM_MAX_S = 300.0
# What the browser waits before it reconnects, in ms.
RECONNECT = "retry: 2000\n\n"


def sse(data: str, event: str = "") -> str:
    lines = [f"event: {event}"] if event else []
    lines += [f"data: {line}" for line in (data.splitlines() or [""])]
    return "\n".join(lines) + "\n\n"


def refreshed(
    render: Callable[[], Awaitable[str | None]], interval: float, max_s: float
) -> StreamingResponse:
    """Re-render every ``interval``; send what changed. A refused call ends it."""

    async def events() -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_s
        last = None
        yield RECONNECT
        while loop.time() < deadline:
            try:
                html = await render()
            except JobsError as error:
                if signed_out(error):
                    yield sse("", "signed-out")
                    return
                html = None  # job_service unreachable for now: keep the last view
            if html is not None and html != last:
                yield sse(html)
                last = html
            else:
                yield ": idle\n\n"
            await asyncio.sleep(interval)  # the refresh period of a live view

    return StreamingResponse(events(), media_type="text/event-stream")

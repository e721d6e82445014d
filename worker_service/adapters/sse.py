"""Server-sent events, as far as OpenAI-compatible streaming uses them: the ``data`` of each
event, in order (the WHATWG event-stream rules: ``data:`` lines joined by newlines, a blank
line ends an event, ``:`` lines are comments, other fields are ignored).

httpx has no SSE reader of its own, and the ``httpx-sse`` package would add a dependency for
these few lines; its rules are the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator


async def event_data(lines: AsyncIterable[str]) -> AsyncIterator[str]:
    """The data of each event in ``lines`` (as ``httpx.Response.aiter_lines`` gives them)."""
    data: list[str] = []
    async for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:  # a stream that ends without the blank line still delivered its last event
        yield "\n".join(data)

"""Resetting a shared NATS server between tests (when JOBS_NATS_URL points at one)."""

from __future__ import annotations

import nats


async def delete_all_streams(url: str) -> None:
    """Delete every JetStream stream (and so every consumer and message) on the server."""
    client = await nats.connect(url)
    try:
        js = client.jetstream()
        # One listing page holds at most 256 streams: list again until none are left.
        while infos := await js.streams_info():
            for info in infos:
                await js.delete_stream(info.config.name)  # type: ignore[arg-type]
    finally:
        await client.close()

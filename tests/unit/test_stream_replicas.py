"""Regression (found by the chaos ``cluster`` profile): a worker declares the streams too,
without knowing JOBS_NATS_STREAM_REPLICAS, and its update scaled the job service's R3
streams down to one server — whose crash then stalled dispatch until it came back."""

from __future__ import annotations

from typing import Any

from nats.js.api import StreamConfig, StreamInfo
from nats.js.errors import NotFoundError

from shared.jetstream import STREAMS, ensure_streams


class FakeJetStream:
    def __init__(self) -> None:
        self.streams: dict[str, StreamConfig] = {}

    async def stream_info(self, name: str) -> Any:
        if name not in self.streams:
            raise NotFoundError
        return StreamInfo(config=self.streams[name], state=None)  # type: ignore[arg-type]

    async def add_stream(self, config: StreamConfig) -> None:
        assert config.name is not None
        self.streams[config.name] = config

    async def update_stream(self, config: StreamConfig) -> None:
        assert config.name is not None and config.name in self.streams
        self.streams[config.name] = config


async def test_a_worker_declaring_the_streams_keeps_their_replicas() -> None:
    js: Any = FakeJetStream()
    await ensure_streams(js, 3)  # the job service
    await ensure_streams(js)  # a worker
    assert {c.num_replicas for c in js.streams.values()} == {3}
    assert len(js.streams) == len(STREAMS)


async def test_streams_a_worker_creates_first_are_scaled_up_by_the_job_service() -> None:
    js: Any = FakeJetStream()
    await ensure_streams(js)
    assert {c.num_replicas for c in js.streams.values()} == {1}
    await ensure_streams(js, 3)
    assert {c.num_replicas for c in js.streams.values()} == {3}

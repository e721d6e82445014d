from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tests.support.processes import WorkerProcess
from tests.support.stack import worker_settings
from worker_service.app import WorkerApp


@pytest.fixture
async def worker(nats_url: str, target: str) -> AsyncIterator[WorkerApp]:
    """One worker in this process."""
    settings = worker_settings(
        nats_url, target, worker_id="inproc-worker", worker_metrics_port=None
    )
    async with WorkerApp(settings) as app:
        yield app


@pytest.fixture
def spawn_worker(
    tmp_path: Path, nats_url: str, target: str
) -> Iterator[Callable[..., WorkerProcess]]:
    """Starts ``python -m worker_service`` processes; kills leftovers afterwards."""
    started: list[WorkerProcess] = []

    def spawn(worker_id: str, **env: str) -> WorkerProcess:
        process = WorkerProcess(tmp_path, worker_id, nats_url, target, **env)
        started.append(process)
        return process

    yield spawn
    for process in started:
        process.close()

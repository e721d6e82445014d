"""What ``make run`` is told by its environment (``JOBS_DATA_DIR``, ``JOBS_GRPC_PORT``,
``JOBS_CONSOLE_PORT``, ...)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DevstackConfig:
    data_dir: Path
    grpc_port: int
    database_url: str | None
    nats_url: str | None
    credentials_master_key: str | None = None
    metrics_port: int | None = None
    worker_metrics_port: int | None = None
    console_port: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> DevstackConfig:
        return cls(
            data_dir=Path(env.get("JOBS_DATA_DIR") or ".jobs-data").absolute(),
            grpc_port=int(env.get("JOBS_GRPC_PORT") or 50051),
            database_url=env.get("JOBS_DATABASE_URL") or None,
            nats_url=env.get("JOBS_NATS_URL") or None,
            credentials_master_key=env.get("JOBS_CREDENTIALS_MASTER_KEY") or None,
            metrics_port=_port(env.get("JOBS_METRICS_PORT")),
            worker_metrics_port=_port(env.get("JOBS_WORKER_METRICS_PORT")),
            console_port=_port(env.get("JOBS_CONSOLE_PORT")),
        )


def _port(value: str | None) -> int | None:
    return int(value) if value else None

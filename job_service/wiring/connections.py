"""What every concern is wired from: the settings, the registry and the open connections."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
from nats.aio.client import Client as NATS

from job_service.settings import JobServiceSettings
from shared.registry import Registry


@dataclass(frozen=True)
class Connections:
    """``pool`` serves the rest with custom plans, ``hot`` the hot path with generic ones
    (``HOT_PATH_SESSION`` says why); ``instance_id`` names this replica."""

    settings: JobServiceSettings
    registry: Registry
    instance_id: str
    pool: asyncpg.Pool
    hot: asyncpg.Pool
    nc: NATS

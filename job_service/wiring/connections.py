"""What every concern is wired from: the settings, the declared job types and the open
connections."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
from nats.aio.client import Client as NATS

from job_service.domain.declared_types import JobTypes
from job_service.settings import JobServiceSettings
from job_service.usecases.job_types import DeclaredJobTypes
from job_service.usecases.sealing import Sealer


@dataclass(frozen=True)
class Connections:
    """``pool`` serves the rest with custom plans, ``hot`` the hot path with generic ones
    (``HOT_PATH_SESSION`` says why); ``instance_id`` names this replica; ``sealer`` seals
    payloads under their users' data keys."""

    settings: JobServiceSettings
    declared: DeclaredJobTypes
    instance_id: str
    pool: asyncpg.Pool
    hot: asyncpg.Pool
    nc: NATS
    # seals and opens payloads at rest (off when no KEK is configured)
    sealer: Sealer

    @property
    def registry(self) -> JobTypes:
        """The job types workers declared, as this replica knows them now."""
        return self.declared.types

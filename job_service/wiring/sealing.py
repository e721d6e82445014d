"""Payload encryption's parts: the KEK from the settings (JOBS_DATA_KEK, its file, retired
ones), the data keys' table, and the Sealer over them; the loops that re-wrap data keys
under a new KEK and seal rows written before encryption."""

from __future__ import annotations

import asyncpg

from job_service.adapters.local_kek import LocalKeyEncryptionKey
from job_service.adapters.postgres.backfill import BackfillRepository
from job_service.adapters.postgres.data_keys import DataKeyRepository
from job_service.loops import Loop
from job_service.periodic import Periodic
from job_service.settings import JobServiceSettings
from job_service.usecases.backfill import BACKFILL_BATCH, BACKFILL_INTERVAL_S, PlaintextBackfill
from job_service.usecases.key_rotation import REWRAP_BATCH, REWRAP_INTERVAL_S, KeyRotation
from job_service.usecases.sealing import Sealer
from job_service.wiring.connections import Connections


def sealer(s: JobServiceSettings, pool: asyncpg.Pool) -> Sealer:
    """The Sealer of the configured KEK; off (payloads stored as they are) without one."""
    kek = LocalKeyEncryptionKey.from_config(
        s.data_kek.get_secret_value() if s.data_kek is not None else "",
        s.data_kek_file,
        s.data_retired_keks.get_secret_value(),
    )
    return Sealer(DataKeyRepository(pool), kek)


def sealing_loops(c: Connections) -> list[tuple[str, Loop]]:
    """The KEK rotation's re-wrap loop and the backfill that seals rows written before
    encryption (only with a KEK: nothing is sealed without one)."""
    kek = c.sealer.kek
    if kek is None:
        return []
    rotation = KeyRotation(DataKeyRepository(c.pool), kek)
    return [
        (
            "data key rotation",
            Periodic(
                "data key rotation",
                rotation.rewrap,
                interval_s=REWRAP_INTERVAL_S,
                batch=REWRAP_BATCH,
            ),
        ),
        (
            "plaintext backfill",
            Periodic(
                "plaintext backfill",
                PlaintextBackfill(BackfillRepository(c.pool), c.sealer).seal_round,
                interval_s=BACKFILL_INTERVAL_S,
                batch=BACKFILL_BATCH,
            ),
        ),
    ]

"""KEK rotation without downtime (issue 44): the current KEK wraps every new data key, the
retired ones still unwrap (``JOBS_DATA_RETIRED_KEKS``), and this loop re-wraps the keys
still wrapped under a retired KEK, a batch per round, on every replica (a compare-and-set
per key: two replicas never undo each other). Payloads are never touched: a data key
re-wrapped is the same key. ``jobs_data_keys_to_rewrap`` counts what is left; at 0 the
old KEK may leave the configuration."""

from __future__ import annotations

import logging

from job_service import sealing_metrics
from job_service.domain.envelopes import data_key_binding
from job_service.ports.data_keys import DataKeyStore
from job_service.ports.key_encryption import KeyEncryptionKey, UnwrapFailed

log = logging.getLogger(__name__)

REWRAP_BATCH = 200
REWRAP_INTERVAL_S = 10.0


class KeyRotation:
    def __init__(self, keys: DataKeyStore, kek: KeyEncryptionKey) -> None:
        self._keys = keys
        self._kek = kek

    async def rewrap(self) -> int:
        """One round: up to REWRAP_BATCH keys wrapped again under the current KEK; how
        many. A key no configured KEK unwraps is left (and logged): its payloads are
        unreadable until that KEK is configured again."""
        current = self._kek.current_id
        done = 0
        for user_id, wrapped in await self._keys.wrapped_elsewhere(current, REWRAP_BATCH):
            binding = data_key_binding(user_id)
            try:
                key = await self._kek.unwrap(wrapped, binding)
            except UnwrapFailed as error:
                log.error("the data key of a user cannot be re-wrapped: %s", error)
                continue
            if await self._keys.rewrap(user_id, wrapped, await self._kek.wrap(key, binding)):
                done += 1
        sealing_metrics.DATA_KEYS_REWRAPPED.inc(done)
        sealing_metrics.DATA_KEYS_TO_REWRAP.set(await self._keys.count_wrapped_elsewhere(current))
        return done

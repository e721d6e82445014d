"""Signals: messages to a job (JobService.SendSignal), stored before they are delivered.

A signal is one row of ``job_signals``, numbered per job in send order (``seq``), written
in one statement that also bumps ``jobs.signal_seq``. Delivery is the worker's pull: a
notice on core NATS (the path cancellation takes) tells the worker running the job that
there is something up to ``seq``, and the worker fetches the signals under its lease
(ExecutorService.FetchSignals). A lost notice costs latency, never a signal: every
heartbeat answer carries ``signal_seq``, and an attempt fetches everything when its job
code first asks. A job holds at most ``max_per_job`` signals (JOBS_MAX_SIGNALS_PER_JOB):
one more is refused, SIGNAL_LIMIT_REACHED. See docs/adr/0006-signals.md.

A payload is sealed under its user's data key (bound to the job and the signal's name)
before it is stored and opened when the worker fetches it; a repeat under an idempotency
key is compared with the stored one opened (``usecases/sealing.py``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from job_service import metrics
from job_service.domain.checks import (
    depth,
    not_json,
    require_name,
    require_uuid,
)
from job_service.domain.envelopes import signal_field
from job_service.domain.lifecycle import LEASED
from job_service.domain.signals import JobSignal, SentSignal, StoredSignal
from job_service.ports.signals import SignalNotifier, SignalStore
from job_service.usecases.sealing import Sealer
from shared.canonical import canonical_json
from shared.errors import FieldViolation, IdempotencyKeyReused, InvalidInput, JobNotFound, LeaseLost

log = logging.getLogger(__name__)

# A signal's name: what job code waits for ("approve", "edit.v2").
SIGNAL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_PAYLOAD_DEPTH = 20
# Signals one FetchSignals answer carries at most.
FETCH_LIMIT = 500


class Signals:
    def __init__(
        self,
        store: SignalStore,
        notifier: SignalNotifier,
        *,
        max_per_job: int,
        sealer: Sealer | None = None,
        wake_dispatcher: Callable[[], None] = lambda: None,
    ) -> None:
        """``sealer`` seals the payloads stored and opens those fetched (None: as they are);
        ``wake_dispatcher``: the send woke a waiting job, whose work token is due now."""
        self._wake_dispatcher = wake_dispatcher
        self._store = store
        self._notifier = notifier
        self._max_per_job = max_per_job
        self._sealer = sealer or Sealer(None, None)

    async def send(
        self,
        job_id: str,
        user_id: str,
        name: str,
        payload: dict[str, Any],
        idempotency_key: str = "",
    ) -> SentSignal:
        require_uuid("job_id", job_id)
        require_name("user_id", user_id)
        require_signal(name, payload)
        if idempotency_key:
            require_name("idempotency_key", idempotency_key)
        field = signal_field(name)
        sealed = await self._sealer.seal(user_id, job_id, field, payload)
        sent = await self._store.send(
            job_id, user_id, name, sealed, idempotency_key or None, self._max_per_job
        )
        if sent is None:
            raise JobNotFound("no such job")
        if isinstance(sent, StoredSignal):
            sent = await self._repeated(job_id, user_id, name, payload, sent)
        if sent.created:
            metrics.signal_sent(sent.job_type)
            if sent.status in LEASED:
                await self._notify(job_id, sent.signal.seq)
            if sent.woke:
                self._wake_dispatcher()
        return sent

    async def fetch(
        self, job_id: str, lease_token: str, after_seq: int
    ) -> tuple[Sequence[JobSignal], bool]:
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        if after_seq < 0:
            raise InvalidInput(
                "after_seq is negative", [FieldViolation("after_seq", "0 or a signal's seq")]
            )
        fetched = await self._store.fetch(job_id, lease_token, after_seq, FETCH_LIMIT)
        if fetched is None:
            metrics.stale_submit("FetchSignals")
            raise LeaseLost("the lease on this job is no longer held")
        metrics.signals_fetched(len(fetched.signals))
        opened = [
            replace(
                s,
                payload=await self._sealer.open(
                    fetched.user_id, job_id, signal_field(s.name), s.payload
                ),
            )
            for s in fetched.signals
        ]
        return opened, fetched.more

    async def _repeated(
        self, job_id: str, user_id: str, name: str, payload: dict[str, Any], stored: StoredSignal
    ) -> SentSignal:
        """The signal stored before under the same key: this one again, or a refusal."""
        if stored.name == name:
            field = signal_field(name)
            if await self._sealer.open(user_id, job_id, field, stored.payload) == payload:
                return stored.sent
        raise IdempotencyKeyReused("this idempotency key was used for another signal to this job")

    async def _notify(self, job_id: str, seq: int) -> None:
        try:
            await self._notifier.notify_signal(job_id, seq)
        except Exception:  # the worker's next heartbeat carries the seq too
            log.warning("signal notice for job %s not sent", job_id, exc_info=True)


def require_signal(name: str, payload: dict[str, Any]) -> None:
    """A well-formed name and a payload storable as jsonb, not too deep or large."""
    if not SIGNAL_NAME.fullmatch(name):
        raise InvalidInput(
            "name is missing or malformed",
            [
                FieldViolation(
                    "name", "1..64 of A-Z a-z 0-9 _ . : -, starting with a letter or digit"
                )
            ],
        )
    try:
        encoded = canonical_json(payload).encode()
    except ValueError:
        raise not_json("payload") from None
    if depth(payload) > MAX_PAYLOAD_DEPTH:
        raise InvalidInput(
            "payload is nested too deeply",
            [FieldViolation("payload", f"at most {MAX_PAYLOAD_DEPTH} levels of objects/lists")],
        )
    if len(encoded) > MAX_PAYLOAD_BYTES:
        raise InvalidInput(
            "payload is too large",
            [FieldViolation("payload", f"at most {MAX_PAYLOAD_BYTES} bytes of JSON")],
        )

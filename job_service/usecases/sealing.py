"""Payloads sealed at rest under their user's data key (issue 44): the Sealer every use case
that stores or shows a payload goes through. A user's data key is made on their first
sealed payload, stored wrapped by the key-encryption key (``ports.key_encryption``), and
kept unwrapped in a small cache, so the hot path pays one AES-GCM call per payload and no
round trip; EraseUserData destroys it (``destroy``), a rotation re-wraps it (``Rotation``,
``usecases/key_rotation.py``).

A payload is bound to its row and field (``domain.envelopes.payload_binding``): a
ciphertext copied to another job, or another field, does not open. Values written before
encryption (plaintext JSON) read as they are: ``open`` passes them through.

Without a KEK configured the Sealer is off: payloads are stored as before, and a sealed
one met on a read is an error (the KEK was removed from the configuration).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from job_service import sealing_metrics as metrics
from job_service.domain.envelopes import (
    INPUT,
    INTERNAL_ERROR,
    OUTPUT,
    PayloadBroken,
    artifact_field,
    as_text,
    data_key_binding,
    from_text,
    new_data_key,
    open_sealed,
    payload_binding,
    seal,
    step_field,
    step_result_field,
)
from job_service.domain.jobs import Job, NewJob
from job_service.ports.data_keys import DataKeyStore
from job_service.ports.key_encryption import KeyEncryptionKey, UnwrapFailed, WrappedKey
from shared.ai.steps import RecordedStep, StepResponse
from shared.durable_steps import StepResult

# Unwrapped keys held: a user's key is unwrapped once per KEY_TTL_S on each replica.
KEY_CACHE_SIZE = 10_000
# How long an unwrapped key is used without looking at the store again. Reads and the
# payloads of existing jobs trust the cache that long; a new job does not: CreateJob's
# statement stores it only while the user's key row holds the key it was sealed under
# (``NewJob.sealed_under``; else DataKeyChanged, and it is sealed again under the current
# one), so that no replica stores a new job under a key an erase on another replica
# destroyed (the erase refuses while the user has unfinished jobs, so only new jobs could
# be sealed under it). A statement that does not check it reads the key row first (fresh).
KEY_TTL_S = 30.0

# A content hash keyed by the user's key: a plain hash of a short input would confirm a
# guess of it; this one means nothing without the key (and nothing once it is destroyed).
_HASH_KEY_INFO = b"jobs.v1/content-hash-key"


class PayloadUnreadable(Exception):
    """A sealed payload that cannot be opened: its user's key was destroyed (erased), no
    KEK that wrapped it is configured, or it was moved or tampered with."""


def _encoded(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class Sealer:
    """Seals and opens payloads; ``enabled`` when a KEK is configured."""

    def __init__(
        self,
        keys: DataKeyStore | None,
        kek: KeyEncryptionKey | None,
        *,
        cache_size: int = KEY_CACHE_SIZE,
        ttl_s: float = KEY_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = keys
        self._kek = kek
        # user → (unwrapped key, until when it is trusted, the wrapping it was read from)
        self._cache: OrderedDict[str, tuple[bytes, float, WrappedKey]] = OrderedDict()
        self._cache_size = cache_size
        self._ttl_s = ttl_s
        self._clock = clock

    @property
    def enabled(self) -> bool:
        return self._kek is not None and self._keys is not None

    @property
    def kek(self) -> KeyEncryptionKey | None:
        return self._kek

    async def seal(self, user_id: str, row_id: str, field: str, value: Any) -> Any:
        """``value`` (JSON) as its column stores it: sealed under the user's key when
        enabled, as it is otherwise."""
        if not self.enabled:
            return value
        key = await self._data_key(user_id, create=True)
        assert key is not None
        return as_text(seal(key, _encoded(value), payload_binding(row_id, field)))

    async def seal_text(self, user_id: str, row_id: str, field: str, text: str) -> str:
        """A text column's value (a step's response): sealed, or as it is."""
        sealed = await self.seal(user_id, row_id, field, text)
        assert isinstance(sealed, str)
        return sealed

    async def open(self, user_id: str, row_id: str, field: str, stored: Any) -> Any:
        """The value a column stores, opened when sealed (PayloadUnreadable when it does
        not open); a plaintext one from before encryption as it is."""
        sealed = from_text(stored)
        if sealed is None:
            return stored
        key = await self._data_key(user_id, create=False) if self.enabled else None
        if key is None:
            metrics.payload_unreadable()
            raise PayloadUnreadable(f"no data key of this user opens the {field} of {row_id}")
        try:
            return json.loads(open_sealed(key, sealed, payload_binding(row_id, field)))
        except PayloadBroken as error:
            metrics.payload_unreadable()
            raise PayloadUnreadable(f"the {field} of {row_id}: {error}") from None

    async def keyed_hash(self, user_id: str, plain: str) -> str:
        """A content hash (hex) keyed by the user's data key: 64 hex digits, as the plain
        one; ``plain`` itself when sealing is off."""
        if not self.enabled:
            return plain
        key = await self._data_key(user_id, create=True)
        assert key is not None
        hash_key = hmac.new(key, _HASH_KEY_INFO, hashlib.sha256).digest()
        return hmac.new(hash_key, plain.encode(), hashlib.sha256).hexdigest()

    async def sealed_job(self, new: NewJob, *, fresh: bool = False) -> NewJob:
        """A new job as it is stored: its snapshot sealed (bound to its id), its request
        and snapshot hashes keyed (the plain request hash kept to recognise a repeat of a
        request made before encryption), and the key it was sealed under named
        (``sealed_under``: CreateJob's statement stores the job only while the user's key
        row still holds it). ``fresh``: the cached key only once the store was read (for a
        statement that does not check ``sealed_under``)."""
        if not self.enabled:
            return new
        held = await self._held_key(new.user_id, create=True, fresh=fresh)
        assert held is not None
        return replace(
            new,
            sealed_under=held[1].blob,
            snapshot=await self.seal(new.user_id, new.id, INPUT, new.snapshot),
            snapshot_hash=await self.keyed_hash(new.user_id, new.snapshot_hash),
            request_hash=await self.keyed_hash(new.user_id, new.request_hash),
            legacy_request_hash=new.request_hash,
        )

    async def opened(self, job: Job) -> Job:
        """A job read from the store with its input, output, artifacts and internal error
        message opened."""
        if not (_any_sealed(job)):
            return job
        user = job.user_id
        return replace(
            job,
            input=await self.open(user, job.id, INPUT, job.input),
            validated_output=await self.open(user, job.id, OUTPUT, job.validated_output),
            internal_error_message=await self.open(
                user, job.id, INTERNAL_ERROR, job.internal_error_message
            ),
            artifacts=[
                replace(
                    a,
                    payload=await self.open(
                        user, job.id, artifact_field(a.artifact_type, a.artifact_id), a.payload
                    ),
                )
                for a in job.artifacts
            ],
        )

    async def sealed_step(
        self, user_id: str, job_id: str, step: str, response: StepResponse
    ) -> StepResponse:
        """A step's response as stored: its text and parsed answer sealed together into
        the text column (the parsed one then NULL)."""
        if not self.enabled:
            return response
        text = await self.seal(user_id, job_id, step_field(step), [response.text, response.parsed])
        return replace(response, text=text, parsed=None)

    async def opened_step(self, user_id: str, job_id: str, recorded: RecordedStep) -> RecordedStep:
        if from_text(recorded.response.text) is None:
            return recorded
        field = step_field(recorded.step)
        text, parsed = await self.open(user_id, job_id, field, recorded.response.text)
        return replace(recorded, response=replace(recorded.response, text=text, parsed=parsed))

    async def sealed_step_result(self, user_id: str, job_id: str, step: StepResult) -> StepResult:
        """A durable step's outcome as stored: its result's JSON text and its error message
        sealed, each bound to the step's ordinal."""
        if not self.enabled:
            return step
        field = step_result_field(step.ordinal)
        return replace(
            step,
            result_json=None
            if step.result_json is None
            else await self.seal_text(user_id, job_id, field, step.result_json),
            error_message=await self.seal_text(
                user_id, job_id, f"{field}/error", step.error_message
            )
            if step.error_message
            else "",
        )

    async def opened_step_result(self, user_id: str, job_id: str, step: StepResult) -> StepResult:
        field = step_result_field(step.ordinal)
        result, message = step.result_json, step.error_message
        return replace(
            step,
            result_json=None if result is None else await self.open(user_id, job_id, field, result),
            error_message=await self.open(user_id, job_id, f"{field}/error", message),
        )

    async def opened_all(self, jobs: list[Job]) -> list[Job]:
        return [await self.opened(j) for j in jobs]

    def forget(self, user_id: str) -> None:
        """Drops the user's cached key (after an erase or a re-wrap)."""
        self._cache.pop(user_id, None)

    async def holds_key(self, user_id: str) -> bool:
        """Whether the user has a data key stored (a dry run of an erase)."""
        return self._keys is not None and await self._keys.find(user_id) is not None

    async def destroy(self, user_id: str) -> bool:
        """Destroys the user's data key: every payload sealed under it stops opening,
        wherever a copy of it is. Whether there was one."""
        self.forget(user_id)
        return self._keys is not None and await self._keys.destroy(user_id)

    async def _data_key(self, user_id: str, *, create: bool) -> bytes | None:
        """The user's unwrapped key (cached for ``ttl_s``)."""
        held = await self._held_key(user_id, create=create)
        return None if held is None else held[0]

    async def _held_key(
        self, user_id: str, *, create: bool, fresh: bool = False
    ) -> tuple[bytes, WrappedKey] | None:
        """The user's unwrapped key and its wrapping as stored: cached for ``ttl_s``;
        ``fresh``: the cached one only while the store still holds it (one read)."""
        now = self._clock()
        cached = self._cache.get(user_id)
        assert self._keys is not None and self._kek is not None
        wrapped = await self._keys.find(user_id) if fresh else None
        if cached is not None and cached[1] > now and (not fresh or wrapped == cached[2]):
            self._cache.move_to_end(user_id)
            return cached[0], cached[2]
        binding = data_key_binding(user_id)
        if not fresh:
            wrapped = await self._keys.find(user_id)
        if wrapped is None:
            if not create:
                return None
            wrapped = await self._keys.add(user_id, await self._kek.wrap(new_data_key(), binding))
            metrics.data_key_created()
        try:
            key = await self._kek.unwrap(wrapped, binding)
        except UnwrapFailed as error:
            raise PayloadUnreadable(f"the data key of this user: {error}") from None
        self._cache[user_id] = (key, now + self._ttl_s, wrapped)
        self._cache.move_to_end(user_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return key, wrapped


def _any_sealed(job: Job) -> bool:
    return (
        from_text(job.input) is not None
        or from_text(job.validated_output) is not None
        or from_text(job.internal_error_message) is not None
        or any(from_text(a.payload) is not None for a in job.artifacts)
    )

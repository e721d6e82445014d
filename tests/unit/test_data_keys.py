"""Envelope encryption's keys: the local key-encryption key wraps and unwraps data keys
bound to their owner, keeps unwrapping under retired KEKs (rotation), and refuses anything
else; a payload sealed under a data key opens only for its job and field."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from devstack.dev_credentials import dev_data_kek
from job_service.adapters.local_kek import KekConfigError, LocalKeyEncryptionKey
from job_service.domain.envelopes import (
    PayloadBroken,
    data_key_binding,
    is_sealed,
    new_data_key,
    open_sealed,
    payload_binding,
    seal,
)
from job_service.ports.key_encryption import KeyEncryptionKey, UnwrapFailed, WrappedKey
from tests.support.stack import settings

OLD, NEW = os.urandom(32), os.urandom(32)
JOB, OTHER_JOB = "0190a0c4-7d2e-7000-8000-000000000001", "0190a0c4-7d2e-7000-8000-000000000002"


def text(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode()


async def test_a_data_key_unwraps_to_itself_for_its_owner() -> None:
    kek: KeyEncryptionKey = LocalKeyEncryptionKey(NEW)
    data_key = new_data_key()
    wrapped = await kek.wrap(data_key, data_key_binding("u1"))
    assert wrapped.kek_id == kek.current_id
    assert data_key not in wrapped.blob
    assert await kek.unwrap(wrapped, data_key_binding("u1")) == data_key
    # a fresh nonce each time: the same key wraps differently
    assert (await kek.wrap(data_key, data_key_binding("u1"))).blob != wrapped.blob


async def test_another_kek_another_owner_or_a_flipped_bit_does_not_unwrap() -> None:
    wrapped = await LocalKeyEncryptionKey(NEW).wrap(new_data_key(), data_key_binding("u1"))
    with pytest.raises(UnwrapFailed, match="not configured"):
        await LocalKeyEncryptionKey(OLD).unwrap(wrapped, data_key_binding("u1"))
    # relabelled as wrapped under another KEK: that KEK does not open it
    relabelled = WrappedKey(LocalKeyEncryptionKey(OLD).current_id, wrapped.blob)
    with pytest.raises(UnwrapFailed, match="does not open"):
        await LocalKeyEncryptionKey(OLD).unwrap(relabelled, data_key_binding("u1"))
    with pytest.raises(UnwrapFailed, match="owner"):
        await LocalKeyEncryptionKey(NEW).unwrap(wrapped, data_key_binding("u2"))
    flipped = WrappedKey(wrapped.kek_id, wrapped.blob[:-1] + bytes([wrapped.blob[-1] ^ 1]))
    with pytest.raises(UnwrapFailed):
        await LocalKeyEncryptionKey(NEW).unwrap(flipped, data_key_binding("u1"))


async def test_rotation_new_wraps_use_the_new_kek_and_retired_ones_still_unwrap() -> None:
    data_key = new_data_key()
    before = await LocalKeyEncryptionKey(OLD).wrap(data_key, data_key_binding("u1"))
    rotated = LocalKeyEncryptionKey(NEW, (OLD,))
    assert rotated.key_ids == {before.kek_id, rotated.current_id}
    assert await rotated.unwrap(before, data_key_binding("u1")) == data_key
    rewrapped = await rotated.wrap(data_key, data_key_binding("u1"))
    assert rewrapped.kek_id == rotated.current_id != before.kek_id
    # once the old KEK is gone, only the re-wrapped key opens
    assert await LocalKeyEncryptionKey(NEW).unwrap(rewrapped, data_key_binding("u1")) == data_key
    with pytest.raises(UnwrapFailed):
        await LocalKeyEncryptionKey(NEW).unwrap(before, data_key_binding("u1"))


def test_a_payload_opens_only_for_its_job_and_field_under_its_key() -> None:
    data_key = new_data_key()
    plaintext = b'{"explanation": "marker-7f3a"}'
    sealed = seal(data_key, plaintext, payload_binding(JOB, "input"))
    assert is_sealed(sealed)
    assert b"marker-7f3a" not in sealed
    assert open_sealed(data_key, sealed, payload_binding(JOB, "input")) == plaintext
    for wrong in (payload_binding(OTHER_JOB, "input"), payload_binding(JOB, "output")):
        with pytest.raises(PayloadBroken):
            open_sealed(data_key, sealed, wrong)
    with pytest.raises(PayloadBroken):
        open_sealed(new_data_key(), sealed, payload_binding(JOB, "input"))
    with pytest.raises(PayloadBroken):
        open_sealed(data_key, sealed[:-1], payload_binding(JOB, "input"))


def test_plaintext_written_before_encryption_is_told_apart() -> None:
    assert not is_sealed(b'{"a": 1}')
    assert not is_sealed(b"")
    with pytest.raises(PayloadBroken, match="not a sealed"):
        open_sealed(new_data_key(), b'{"a": 1}', payload_binding(JOB, "input"))


def test_the_kek_comes_from_the_variable_or_its_file(tmp_path: Path) -> None:
    path = tmp_path / "kek"
    path.write_text(text(OLD) + "\n")
    from_file = LocalKeyEncryptionKey.from_config("", str(path))
    assert from_file is not None
    assert from_file.current_id == LocalKeyEncryptionKey(OLD).current_id
    # the variable wins over the file
    from_variable = LocalKeyEncryptionKey.from_config(text(NEW), str(path), text(OLD))
    assert from_variable is not None
    assert from_variable.current_id == LocalKeyEncryptionKey(NEW).current_id
    assert LocalKeyEncryptionKey.from_config("", "") is None
    with pytest.raises(KekConfigError, match="JOBS_DATA_KEK_FILE"):
        LocalKeyEncryptionKey.from_config("", str(tmp_path / "missing"))
    with pytest.raises(KekConfigError, match="32 bytes") as raised:
        LocalKeyEncryptionKey.from_config(text(OLD[:16]), "")
    assert text(OLD[:16]) not in str(raised.value)


def test_settings_refuse_a_malformed_kek_without_quoting_it() -> None:
    with pytest.raises(ValidationError) as raised:
        settings("postgresql://x@y/z", "nats://n", data_kek="not-a-key-at-all")
    assert "data_kek" in str(raised.value)
    with pytest.raises(ValidationError):
        settings("postgresql://x@y/z", "nats://n", data_retired_keks=f"{text(OLD)},short")
    ok = settings("postgresql://x@y/z", "nats://n", data_kek=text(NEW))
    assert ok.data_kek is not None


def test_make_run_generates_a_private_kek_once(tmp_path: Path) -> None:
    path = dev_data_kek(tmp_path)
    first = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert dev_data_kek(tmp_path).read_text() == first  # kept across restarts
    assert LocalKeyEncryptionKey.from_config("", str(path)) is not None

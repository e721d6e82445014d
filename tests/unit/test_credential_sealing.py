"""Users' provider keys at rest: AES-GCM sealing bound to the row, master keys, rotation,
fingerprints, and settings that never echo a key."""

from __future__ import annotations

import base64
import dataclasses
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from job_service.domain.credentials import (
    Keyring,
    MasterKeyError,
    ResolvedKey,
    SealBroken,
    Sealed,
    binding,
    key_id,
    new_master_key,
    parse_master_key,
)
from job_service.settings import JobServiceSettings
from shared.credentials import fingerprint
from shared.settings_errors import describe

API_KEY = "sk-test-0123456789abcdef-UNIT"
MASTER = os.urandom(32)
AAD = binding("user-1", "5b0c7d4e-0000-4000-8000-000000000001", "deepseek")


def test_a_sealed_key_opens_with_its_binding() -> None:
    keyring = Keyring(MASTER)

    sealed = keyring.seal(API_KEY, AAD)

    assert keyring.open(sealed, AAD) == API_KEY
    assert API_KEY.encode() not in sealed.ciphertext
    assert sealed.key_id == key_id(MASTER)
    assert len(sealed.nonce) == 12


def test_each_seal_uses_a_fresh_nonce() -> None:
    keyring = Keyring(MASTER)

    first, second = keyring.seal(API_KEY, AAD), keyring.seal(API_KEY, AAD)

    assert first.nonce != second.nonce
    assert first.ciphertext != second.ciphertext


@pytest.mark.parametrize(
    ("user_id", "credential_id", "provider"),
    [
        ("user-2", "5b0c7d4e-0000-4000-8000-000000000001", "deepseek"),  # another user
        ("user-1", "5b0c7d4e-0000-4000-8000-000000000002", "deepseek"),  # another row
        ("user-1", "5b0c7d4e-0000-4000-8000-000000000001", "openai"),  # another provider
        # the separator keeps the parts apart: no shifting of characters between them
        ("user-15b0c7d4e", "-0000-4000-8000-000000000001", "deepseek"),
    ],
)
def test_a_key_moved_to_another_binding_does_not_open(
    user_id: str, credential_id: str, provider: str
) -> None:
    keyring = Keyring(MASTER)
    sealed = keyring.seal(API_KEY, AAD)

    with pytest.raises(SealBroken):
        keyring.open(sealed, binding(user_id, credential_id, provider))


@pytest.mark.parametrize("part", ["nonce", "ciphertext"])
def test_a_tampered_seal_does_not_open(part: str) -> None:
    keyring = Keyring(MASTER)
    sealed = keyring.seal(API_KEY, AAD)
    value = bytearray(getattr(sealed, part))
    value[0] ^= 0x01

    with pytest.raises(SealBroken):
        keyring.open(dataclasses.replace(sealed, **{part: bytes(value)}), AAD)


def test_a_truncated_seal_does_not_open() -> None:
    keyring = Keyring(MASTER)
    sealed = keyring.seal(API_KEY, AAD)

    with pytest.raises(SealBroken):
        keyring.open(dataclasses.replace(sealed, ciphertext=sealed.ciphertext[:-1]), AAD)


def test_another_master_key_cannot_open_a_seal_even_under_the_same_key_id() -> None:
    sealed = Keyring(MASTER).seal(API_KEY, AAD)
    other = Keyring(os.urandom(32))

    with pytest.raises(SealBroken, match="not configured"):
        other.open(sealed, AAD)
    with pytest.raises(SealBroken):  # forged key id: the tag still fails
        other.open(dataclasses.replace(sealed, key_id=other.current_id), AAD)


def test_a_retired_master_key_still_opens_and_reseal_moves_to_the_current_one() -> None:
    old_sealed = Keyring(MASTER).seal(API_KEY, AAD)
    rotated = Keyring(os.urandom(32), retired=(MASTER,))

    assert rotated.open(old_sealed, AAD) == API_KEY
    fresh = rotated.reseal(old_sealed, AAD)

    assert fresh is not None and fresh.key_id == rotated.current_id
    assert rotated.open(fresh, AAD) == API_KEY
    assert rotated.reseal(fresh, AAD) is None  # already under the current key
    with pytest.raises(SealBroken):
        Keyring(MASTER).open(fresh, AAD)


@settings(database=None, max_examples=50)
@given(api_key=st.text(min_size=1, max_size=300), user_id=st.text(min_size=1, max_size=40))
def test_any_key_round_trips_for_any_user(api_key: str, user_id: str) -> None:
    keyring = Keyring(MASTER)
    aad = binding(user_id, "id", "p")
    assert keyring.open(keyring.seal(api_key, aad), aad) == api_key


# --- master keys ---------------------------------------------------------------------


def test_master_keys_parse_from_url_safe_or_standard_base64_with_or_without_padding() -> None:
    raw = bytes(range(250, 256)) + os.urandom(26)
    for text in (
        base64.urlsafe_b64encode(raw).decode(),
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "  " + base64.urlsafe_b64encode(raw).decode() + "\n",
    ):
        assert parse_master_key(text) == raw
    assert len(parse_master_key(new_master_key())) == 32


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not base64 at all!",
        base64.b64encode(b"short").decode(),
        base64.b64encode(b"x" * 33).decode(),
    ],
)
def test_malformed_master_keys_are_refused_without_quoting_them(text: str) -> None:
    with pytest.raises(MasterKeyError) as raised:
        parse_master_key(text)
    assert not text or text not in str(raised.value)


def test_key_ids_name_keys_without_revealing_them() -> None:
    assert key_id(MASTER) == key_id(MASTER)
    assert key_id(MASTER) != key_id(os.urandom(32))
    assert MASTER.hex()[:16] != key_id(MASTER)


def test_settings_refuse_a_malformed_master_key_by_name_and_never_echo_it() -> None:
    bad = base64.b64encode(b"thirty-one bytes, one too few!!").decode()
    with pytest.raises(ValidationError) as raised:
        JobServiceSettings(database_url="postgresql://x@y/z", credentials_master_key=bad)  # type: ignore[arg-type]

    message = describe(raised.value)
    assert "JOBS_CREDENTIALS_MASTER_KEY" in message
    assert bad not in message and bad not in str(raised.value)


def test_settings_refuse_a_malformed_retired_key() -> None:
    good = new_master_key()
    with pytest.raises(ValidationError) as raised:
        JobServiceSettings(
            database_url="postgresql://x@y/z",
            credentials_master_key=good,  # type: ignore[arg-type]
            credentials_retired_master_keys=f"{new_master_key()},oops",  # type: ignore[arg-type]
        )
    assert "JOBS_CREDENTIALS_RETIRED_MASTER_KEYS" in describe(raised.value)
    assert good not in repr(raised.value)


def test_settings_build_the_keyring_and_never_show_the_keys() -> None:
    current, old = new_master_key(), new_master_key()
    configured = JobServiceSettings(
        database_url="postgresql://x@y/z",
        credentials_master_key=current,  # type: ignore[arg-type]
        credentials_retired_master_keys=old,  # type: ignore[arg-type]
    )

    keyring = configured.keyring()

    assert keyring is not None
    assert keyring.current_id == key_id(parse_master_key(current))
    assert keyring.key_ids == {keyring.current_id, key_id(parse_master_key(old))}
    assert current not in repr(configured) and old not in repr(configured)
    assert JobServiceSettings(database_url="postgresql://x@y/z").keyring() is None


# --- what a key looks like outside ---------------------------------------------------


def test_fingerprints_tell_keys_apart_and_match_sha256sum() -> None:
    assert fingerprint(API_KEY) == fingerprint(API_KEY)
    assert fingerprint(API_KEY) != fingerprint(API_KEY + "x")
    # printf %s "$KEY" | sha256sum
    assert fingerprint("abc") == "sha256:ba7816bf8f01cfea"
    assert API_KEY not in fingerprint(API_KEY)


def test_reprs_hide_keys_and_ciphertexts() -> None:
    sealed = Keyring(MASTER).seal(API_KEY, AAD)
    resolved = ResolvedKey(API_KEY, "deepseek", "cred-1")

    assert API_KEY not in repr(resolved) and "cred-1" in repr(resolved)
    assert repr(sealed.ciphertext) not in repr(sealed)
    assert isinstance(sealed, Sealed)

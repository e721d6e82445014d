"""Secrets: users' sealed provider keys, and the secrets every replica shares."""

from __future__ import annotations

from sqlalchemy import (
    Column,
    DateTime,
    Index,
    LargeBinary,
    String,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import UUID

from job_service.adapters.postgres.tables.base import metadata

# Users' own provider keys, sealed (job_service.domain.credentials): the plaintext is never
# stored; `nonce` and `ciphertext` open only with the master key `key_id` names and only as
# this row's (user_id, id, provider).
credentials = Table(
    "credentials",
    metadata,
    Column("id", UUID(as_uuid=False), primary_key=True),
    Column("user_id", String(255), nullable=False),
    Column("provider", String(64), nullable=False),
    Column("label", String(200), nullable=False, server_default=""),
    Column("fingerprint", String(64), nullable=False),
    Column("key_id", String(32), nullable=False),
    Column("nonce", LargeBinary, nullable=False),
    Column("ciphertext", LargeBinary, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_used_at", DateTime(timezone=True)),
    # PutCredential's idempotency key and the hash of the request it stored (migration 0023)
    Column("idempotency_key", String(255)),
    Column("request_hash", String(64)),
    Index("credentials_user_created", "user_id", "created_at"),
    Index(
        "credentials_idempotency_unique",
        "user_id",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
)


# Secrets every replica shares; "page_token" signs ListJobs page tokens (migration 0005).
api_secrets = Table(
    "api_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("secret", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

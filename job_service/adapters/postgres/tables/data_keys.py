"""Users' data keys (migration 0050), stored only wrapped by the key-encryption key."""

from __future__ import annotations

from sqlalchemy import Column, DateTime, Index, LargeBinary, String, Table, func

from job_service.adapters.postgres.tables.base import metadata

user_data_keys = Table(
    "user_data_keys",
    metadata,
    Column("user_id", String(255), primary_key=True),
    # which KEK wrapped it (``KeyEncryptionKey.current_id`` at the wrap): a rotation
    # re-wraps every key whose kek_id is not the current one
    Column("kek_id", String(64), nullable=False),
    Column("wrapped", LargeBinary, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("rewrapped_at", DateTime(timezone=True)),
    Index("user_data_keys_kek", "kek_id"),
)

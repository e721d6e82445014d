"""time-ordered job ids: new jobs get a UUID of version 7 (RFC 9562: the creation time in
milliseconds, then random bits) instead of version 4 (all random)

Every index keyed by a job id (jobs' primary key, snapshots, timeline, artifacts, usage
rows, the outbox's dedupe keys) then takes new entries at its right edge, in pages already
in memory and already written to the WAL since the last checkpoint, instead of at random
pages across the whole index: on a table of 1,100,000 jobs a create, get, lock and submit
wrote 32-58 KiB of WAL (mostly full-page images) against 7.5 KiB on an empty one, and read
pages from outside the buffer cache (docs/benchmarks.md). Ids stay opaque UUIDs: nothing
reads meaning from them, and the old ones stay valid.

Expand-only, like every migration (tests/unit/test_expand_only_migrations.py): a function
and a column default; an older replica inserting version-4 ids meanwhile is harmless.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-15 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# gen_random_uuid()'s 16 bytes with the first 6 replaced by the Unix time in milliseconds
# (big-endian: the last 6 bytes of the 8-byte bigint), and the version nibble moved from
# 4 (0100) to 7 (0111) by setting its two low bits (set_bit counts bits from the least
# significant one of each byte: bits 52 and 53 are bits 4 and 5 of byte 6). The variant
# bits stay gen_random_uuid()'s (10).
CREATE_FUNCTION = """
CREATE FUNCTION job_id_v7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(
                        int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                        FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$
"""


def upgrade() -> None:
    op.execute(CREATE_FUNCTION)
    op.alter_column("jobs", "id", server_default=sa.text("job_id_v7()"))


def downgrade() -> None:
    op.alter_column("jobs", "id", server_default=sa.text("gen_random_uuid()"))
    op.execute("DROP FUNCTION job_id_v7()")

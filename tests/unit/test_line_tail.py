"""jobs_line_tail (migration 0055) reads a line's last place as ``place_in_line`` does: the
same waiting statuses, spelled in the migration (frozen) and in the vocabulary."""

from __future__ import annotations

import importlib

from job_service.adapters.postgres.vocabulary.statuses import WAITING


def test_the_function_counts_the_statuses_place_in_line_counts() -> None:
    migration = importlib.import_module(
        "job_service.adapters.postgres.migrations.versions.0055_line_tail"
    )
    assert migration.WAITING == WAITING
    assert f"w.status IN {WAITING}" in migration.LINE_TAIL

"""A child job a result projects: what it takes from its parent's row, and the rest from the
record the worker sent."""

from __future__ import annotations

from job_service.adapters.postgres.vocabulary.new_job import (
    NEW_JOB_COLUMNS,
    SNAPSHOT_FIELDS,
    record_type,
)

# A child belongs to its parent's user and runs with the parent's key when it inherits it:
# those columns come from the parent's row, the rest from the record.
FROM_PARENT = ("user_id", "credential_mode", "credential_id")
CHILD_COLUMNS = {c: t for c, t in NEW_JOB_COLUMNS.items() if c not in FROM_PARENT}
CHILD_RECORD = {
    "parent_job_id": "uuid",
    **CHILD_COLUMNS,
    **SNAPSHOT_FIELDS,
    "inherits_credential": "bool",
}


def children_of(records: str, parents: str) -> str:
    """The children in the JSON array ``records`` of the parents in ``parents`` (a CTE of
    results committed, with ``id``, ``user_id``, ``credential_mode``, ``credential_id``),
    each with its parent's user and, when it inherits it, its parent's credential."""
    return f"""SELECT c.*, {parents}.user_id,
           CASE WHEN c.inherits_credential THEN {parents}.credential_mode ELSE 'platform'
           END AS credential_mode,
           CASE WHEN c.inherits_credential THEN {parents}.credential_id END AS credential_id
    FROM jsonb_to_recordset({records}::jsonb) AS c({record_type(CHILD_RECORD)})
    JOIN {parents} ON {parents}.id = c.parent_job_id"""

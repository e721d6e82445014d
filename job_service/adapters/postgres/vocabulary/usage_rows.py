"""Usage rows (one per provider call) as the postgres adapters write them: with a failed
attempt's end or a late report (leases), with a result (results), with a recorded step
(steps), from one jsonb array."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from shared.ai.provider import UsageRecord

_COLUMNS = """
    job_id uuid, provider text, model text, credential_mode text, input_tokens int,
    output_tokens int, cost_usd numeric, latency_ms int, error_code text, call_id text, reused bool
"""


def insert_usage(records: str, attempt: str, join: str = "") -> str:
    """Inserts the usage rows of the jsonb array ``records`` (SQL) as attempt ``attempt``
    (an SQL expression), optionally joined (``join``) to the rows that may take them. A
    record whose call id is stored already is skipped: whichever path reports a call
    first (a result, a failure, ReportUsage), it is stored once."""
    return f"""
    INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode, input_tokens,
                            output_tokens, cost_usd, latency_ms, error_code, call_id, reused)
    SELECT u.job_id, {attempt}, u.provider, u.model, u.credential_mode, u.input_tokens,
           u.output_tokens, u.cost_usd, u.latency_ms, nullif(u.error_code, ''),
           nullif(u.call_id, ''), coalesce(u.reused, false)
    FROM jsonb_to_recordset({records}::jsonb) AS u({_COLUMNS}) {join}
    ON CONFLICT (call_id) WHERE call_id IS NOT NULL DO NOTHING
"""


def usage_row(job_id: str, usage: UsageRecord) -> dict[str, Any]:
    """A provider call's usage as an element of ``insert_usage``'s array."""
    # the cost as its decimal text: jsonb_to_recordset reads it into numeric exactly
    return {"job_id": job_id, **asdict(usage), "cost_usd": str(usage.cost_usd)}

"""Checkpoints on PostgreSQL: a job's recorded steps (``job_steps``), written fenced by the
lease together with the call's usage row, and its durable steps' outcomes
(``job_step_results``), fenced the same way; both read for the jobs a claim granted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import asyncpg

from job_service.adapters.postgres.vocabulary.usage_rows import insert_usage, usage_row
from job_service.domain.lifecycle import LEASED, status_values
from shared.ai.provider import UsageRecord
from shared.ai.steps import RecordedStep, StepResponse
from shared.durable_steps import StepResult
from shared.errors import LeaseLost

# One statement: the step and its call's usage row, only while $2 is the job's current
# lease. FOR SHARE waits for a concurrent end of the attempt and sees its outcome, so a
# worker whose lease the reaper just ended records nothing. A step recorded again (a
# repair call after its response failed validation) replaces the response; the usage row
# is one per call (call_id), whichever path stores it first.
RECORD_STEP = f"""
WITH job AS (
    SELECT id, attempt_count FROM jobs
    WHERE id = $1 AND lease_token = $2 AND status = ANY($3::text[])
    FOR SHARE
), step AS (
    INSERT INTO job_steps AS s (job_id, step, attempt, call_id, response_text,
                                response_parsed, provider, model, input_tokens,
                                output_tokens)
    SELECT id, $4, attempt_count, $5, $6, $7::jsonb, $12, $8, $9, $10 FROM job
    ON CONFLICT (job_id, step) DO UPDATE SET
        attempt = excluded.attempt, call_id = excluded.call_id,
        response_text = excluded.response_text, response_parsed = excluded.response_parsed,
        provider = excluded.provider, model = excluded.model, input_tokens = excluded.input_tokens,
        output_tokens = excluded.output_tokens, created_at = now()
), usage AS (
    {insert_usage("$11", "job.attempt_count", "CROSS JOIN job")}
)
SELECT attempt_count FROM job
"""

STEPS_OF = """
SELECT job_id::text AS job_id, step, attempt, call_id, response_text, response_parsed,
       provider, model, input_tokens, output_tokens
FROM job_steps WHERE job_id = ANY($1::uuid[])
ORDER BY job_id, created_at, step
"""

# One statement: a durable step's outcome, only while $2 is the job's current lease (FOR
# SHARE, as RECORD_STEP). The first outcome at an ordinal stays: a repeat inserts nothing
# and reads the stored row (the statement's snapshot sees a row committed before it, never
# the one it inserts itself: ``stored`` is NULL exactly when this call recorded it).
RECORD_STEP_RESULT = """
WITH job AS (
    SELECT id, attempt_count FROM jobs
    WHERE id = $1 AND lease_token = $2 AND status = ANY($3::text[])
    FOR SHARE
), inserted AS (
    INSERT INTO job_step_results (job_id, ordinal, name, attempt, result, error_code,
                                  error_message)
    SELECT id, $4, $5, attempt_count, $6, $7, $8 FROM job
    ON CONFLICT (job_id, ordinal) DO NOTHING
    RETURNING attempt
)
SELECT (SELECT attempt FROM inserted) AS inserted_attempt, r.name, r.attempt, r.result,
       r.error_code, r.error_message
FROM job LEFT JOIN job_step_results r ON r.job_id = job.id AND r.ordinal = $4
"""

STEP_RESULTS_OF = """
SELECT job_id::text AS job_id, ordinal, name, attempt, result, error_code, error_message
FROM job_step_results WHERE job_id = ANY($1::uuid[])
ORDER BY job_id, ordinal
"""

JOB_TYPE = "SELECT job_type FROM jobs WHERE id = $1::uuid"
JOB_OWNER = "SELECT user_id FROM jobs WHERE id = $1::uuid"

_LEASED = status_values(LEASED)


class StepRepository:
    """``job_steps`` on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def record_step(
        self,
        job_id: str,
        lease_token: str,
        step: str,
        response: StepResponse,
        usage: UsageRecord,
    ) -> int:
        attempt = await self._pool.fetchval(
            RECORD_STEP,
            job_id,
            lease_token,
            _LEASED,
            step,
            usage.call_id,
            response.text,
            response.parsed,
            response.model,
            response.input_tokens,
            response.output_tokens,
            [usage_row(job_id, usage)],
            response.provider or usage.provider,
        )
        if attempt is None:
            raise LeaseLost("the lease on this job is no longer held")
        return int(attempt)

    async def record_step_result(
        self, job_id: str, lease_token: str, step: StepResult
    ) -> tuple[bool, StepResult | None]:
        row = await self._pool.fetchrow(
            RECORD_STEP_RESULT,
            job_id,
            lease_token,
            _LEASED,
            step.ordinal,
            step.name,
            step.result_json,
            step.error_code,
            step.error_message or None,
        )
        if row is None:
            raise LeaseLost("the lease on this job is no longer held")
        if row["inserted_attempt"] is not None:
            return True, replace(step, attempt=row["inserted_attempt"])
        if row["name"] is None:  # a concurrent call's row, committed after this snapshot
            return False, None
        return False, _step_result(step.ordinal, row)

    async def step_results_of(self, job_ids: Sequence[str]) -> dict[str, list[StepResult]]:
        found: dict[str, list[StepResult]] = {}
        for row in await self._pool.fetch(STEP_RESULTS_OF, list(job_ids)):
            found.setdefault(row["job_id"], []).append(_step_result(row["ordinal"], row))
        return found

    async def job_type(self, job_id: str) -> str | None:
        job_type: str | None = await self._pool.fetchval(JOB_TYPE, job_id)
        return job_type

    async def owner(self, job_id: str) -> str | None:
        user_id: str | None = await self._pool.fetchval(JOB_OWNER, job_id)
        return user_id

    async def steps_of(self, job_ids: Sequence[str]) -> dict[str, list[RecordedStep]]:
        found: dict[str, list[RecordedStep]] = {}
        for row in await self._pool.fetch(STEPS_OF, list(job_ids)):
            found.setdefault(row["job_id"], []).append(
                RecordedStep(
                    step=row["step"],
                    response=StepResponse(
                        text=row["response_text"],
                        parsed=row["response_parsed"],
                        model=row["model"],
                        input_tokens=row["input_tokens"],
                        output_tokens=row["output_tokens"],
                        provider=row["provider"],
                    ),
                    attempt=row["attempt"],
                    call_id=row["call_id"],
                )
            )
        return found


def _step_result(ordinal: int, row: asyncpg.Record) -> StepResult:
    return StepResult(
        ordinal=ordinal,
        name=row["name"],
        result_json=row["result"],
        error_code=row["error_code"],
        error_message=row["error_message"] or "",
        attempt=row["attempt"],
    )

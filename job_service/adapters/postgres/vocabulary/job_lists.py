"""What one read of a job shows of its lists beside its row (GetJob): pieces of GET_JOB."""

from __future__ import annotations


def durable_steps(job_id: str, limit: str) -> str:
    """The first ``limit`` (SQL) durable steps of the job ``job_id`` (SQL) as a jsonb list
    in order, ``steps`` (position, name, attempt, time, a job error's code: never a value),
    and how many it recorded, ``steps_total``."""
    return f"""(SELECT coalesce(jsonb_agg(jsonb_build_object(
                'ordinal', r.ordinal, 'name', r.name, 'attempt', r.attempt,
                'recorded_at', r.created_at, 'error_code', r.error_code) ORDER BY r.ordinal),
             '[]')
     FROM (SELECT ordinal, name, attempt, created_at, error_code FROM job_step_results
           WHERE job_id = {job_id} ORDER BY ordinal LIMIT {limit}) r) AS steps,
    (SELECT count(*) FROM job_step_results r WHERE r.job_id = {job_id})::int AS steps_total"""

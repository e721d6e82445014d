"""The quota gate in SQL, as CreateJob and CreateJobs spell it: what a user has used (the
``usage`` columns), whether a new job fits (``within_quotas``, the pure twin of
``domain.quotas.admits``) and the day's counter bumped by the jobs inserted (``counted``).
Each takes the statement's parameters (the limits; 0 turns one off) as SQL text, as the
two statements bind them in different places.

The unfinished-jobs count stops at its limit (0 counts nothing), so it costs at most that
many index entries; the jobs created today (UTC) are a counter row per user and day (0
leaves the counter alone), bumped in the statement that creates them; the day's cost (0
reads nothing) is summed from the user's usage rows of today (``spent_today``). The status
list is spelled as the partial index jobs_user_active spells it.
"""

from __future__ import annotations

from job_service.adapters.postgres.vocabulary.new_job import spent_today
from job_service.domain.lifecycle import ACTIVE, statuses_sql

_TODAY = "(now() AT TIME ZONE 'UTC')::date"


def usage(user: str, max_active: str, daily: str, budget: str) -> str:
    """User ``user``'s (SQL) usage as three columns: ``active`` (unfinished jobs, up to
    ``max_active``), ``today`` (jobs created today) and ``spent`` (today's cost)."""
    return f"""(SELECT count(*) FROM (SELECT 1 FROM jobs WHERE user_id = {user}
                               AND status IN {statuses_sql(ACTIVE)} LIMIT {max_active}) a)
            AS active,
        coalesce((SELECT created FROM job_quota_usage
                  WHERE {daily} > 0 AND user_id = {user}
                    AND day = {_TODAY}), 0) AS today,
        {spent_today(user, budget)} AS spent"""


def within_quotas(used: str, nth: str, max_active: str, daily: str, budget: str) -> str:
    """The ``nth`` (SQL) new job of the user whose usage is row ``used`` fits: the unfinished
    and the day's jobs counted with it stay within their limits, and the day's cost is
    below the budget."""
    return f"""({max_active} = 0 OR {used}.active + {nth} <= {max_active})
      AND ({daily} = 0 OR {used}.today + {nth} <= {daily})
      AND ({budget} = 0 OR {used}.spent < {budget})"""


def counted(inserted: str, daily: str) -> str:
    """The day's counter of each user bumped by the jobs of ``inserted`` (a CTE), when the
    daily limit is on: an INSERT for a CTE of its own."""
    return f"""INSERT INTO job_quota_usage AS q (user_id, day, created)
    SELECT user_id, {_TODAY}, count(*) FROM {inserted}
    WHERE {daily} > 0
    GROUP BY user_id
    ON CONFLICT (user_id, day) DO UPDATE SET created = q.created + excluded.created"""

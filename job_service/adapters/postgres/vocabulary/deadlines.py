"""An attempt's deadline in SQL: its grant's time plus its job's ``timeout_ms`` plus the
grace, a quarter of the timeout but at most JOBS_ATTEMPT_TIMEOUT_GRACE_S (a session setting
the pool sets; the policy's default when a pool was made without it): ``timeout_grace_s``
in ``domain/attempts.py``. A lease never runs past it: the grant and every
heartbeat cap ``lock_until`` there, a heartbeat past it finds no lease, and the reaper,
which ends what ``lock_until`` let lapse, ends such an attempt as a TIMEOUT
(``domain/attempts.py``).
"""

from __future__ import annotations

from job_service.domain.attempts import DEFAULT_TIMEOUT_GRACE_S, TIMEOUT_GRACE_FRACTION

GRACE_S = (
    "coalesce(nullif(current_setting('jobs.attempt_timeout_grace_s', true), '')::float8, "
    f"{DEFAULT_TIMEOUT_GRACE_S})"
)


def attempt_deadline(granted_at: str, timeout_ms: str) -> str:
    """The SQL of the moment an attempt granted at ``granted_at`` has run too long."""
    grace_s = f"least({GRACE_S}, {timeout_ms} * {TIMEOUT_GRACE_FRACTION / 1000})"
    return (
        f"({granted_at} + {timeout_ms} * interval '1 millisecond'"
        f" + {grace_s} * interval '1 second')"
    )


def lease_until(ttl_ms: str, granted_at: str, timeout_ms: str) -> str:
    """A lease renewed now for ``ttl_ms``, capped at the attempt's deadline."""
    return (
        f"least(now() + {ttl_ms} * interval '1 millisecond', "
        f"{attempt_deadline(granted_at, timeout_ms)})"
    )

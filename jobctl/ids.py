"""Job ids as people type them: whole, or short.

Job ids are version-7 UUIDs: their first characters are the creation time, shared by jobs
created together, so the part that tells jobs apart is the end. jobctl's tables, ``jobctl
tree`` and the console show the last 8 characters (the short id); every command that takes
a JOB_ID takes those too, or any 6 to 32 hex digits from the end of the id (dashes
ignored). The job service finds the jobs whose id ends so (ListJobs ``id_suffix``);
``jobctl.lookup`` turns the answer into one job.
"""

from __future__ import annotations

import re

from jobctl.exits import UsageError

SHORT_ID = 8
# How many matches a lookup asks for: one names the job, two say it is ambiguous.
MATCHES = 2

_WHOLE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_HEX = re.compile(r"^[0-9a-f]+$")
SUFFIX_DIGITS = range(6, 33)


def short_id(job_id: str) -> str:
    """The id's last characters: where jobs created in the same millisecond differ."""
    return job_id[-SHORT_ID:]


def suffix(text: str) -> str | None:
    """The hex digits of a short id (``1a2b3c4d``, ``56-78-9a-bc``), lower case; None for
    a whole id, or anything that is not hex digits (used as it is: the service judges it).
    Too few or too many digits for a short id is a usage error."""
    lowered = text.strip().lower()
    digits = lowered.replace("-", "")
    if _WHOLE.match(lowered) or not _HEX.match(digits):
        return None
    if len(digits) not in SUFFIX_DIGITS:
        raise UsageError(
            f"{text!r} is not a job id: give the whole id, or its last 6 to 32 hex digits "
            f"(the {SHORT_ID} that `jobctl list` shows)"
        )
    return digits


def ambiguous(text: str, job_ids: list[str]) -> UsageError:
    return UsageError(f"{text!r} is ambiguous: matches {', '.join(job_ids)}; give more characters")

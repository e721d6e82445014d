"""Job ids as the console names them.

Job ids are version-7 UUIDs: their first characters are the creation time, shared by every
job created in the same minute (a fan-out's children, a burst from one client), and the
rest is random. So where a page has room only for a short form it shows the id's *last*
``SHORT_ID`` characters, as ``jobctl``'s tree does, with the whole id in its title (and on
the job's page, to copy). The "go to job" box takes a whole id, or the end of one
(``parse_id_suffix``: what ``ListJobs``' ``id_suffix`` accepts).
"""

from __future__ import annotations

import re
import uuid

SHORT_ID = 8
# What an error message repeats of a rejected input (it may be anything, of any length).
ECHO_CHARS = 60
# The end of an id the box looks a job up by: as job_service's id_suffix filter reads it.
ID_SUFFIX = re.compile(r"[0-9a-f]{6,32}")


def short_id(job_id: str) -> str:
    """The id's random tail: ``0190f3c2-7a1b-7000-8000-00005e1a9c3f`` -> ``5e1a9c3f``."""
    return job_id[-SHORT_ID:]


def echo(text: str) -> str:
    """What a message repeats of ``text``: at most ``ECHO_CHARS`` characters."""
    return text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS] + "…"


def parse_id_suffix(text: str) -> str | None:
    """``text`` as the end of a job id (6 to 32 hex digits, dashes ignored), lower case
    without dashes; None when it is none."""
    digits = text.strip().replace("-", "").lower()
    return digits if ID_SUFFIX.fullmatch(digits) else None


def parse_job_id(text: str) -> str:
    """``text`` as a job id in its canonical form (lower case, with hyphens); ValueError,
    with a message to show the user, when it is none."""
    given = text.strip()
    if not given:
        raise ValueError("Enter a job id.")
    try:
        return str(uuid.UUID(given))
    except ValueError:
        pass
    hint = (
        " That looks like a short id: lists show only an id's last 8 characters. The"
        " “Go to job” box finds a job by them; a job's address needs the whole id."
        if parse_id_suffix(given) is not None
        else ""
    )
    raise ValueError(
        f"“{echo(given)}” is not a job id: a job id is a UUID of 36 characters, such as"
        f" 0190f3c2-7a1b-7000-8000-00005e1a9c3f.{hint}"
    )

"""Job ids as the console names them.

Job ids are version-7 UUIDs: their first characters are the creation time, shared by every
job created in the same minute (a fan-out's children, a burst from one client), and the
rest is random. So where a page has room only for a short form it shows the id's *last*
``SHORT_ID`` characters, as ``jobctl``'s tree does, with the whole id in its title (and on
the job's page, to copy). The "go to job" box takes a whole id.
"""

from __future__ import annotations

import uuid

SHORT_ID = 8
# What an error message repeats of a rejected input (it may be anything, of any length).
ECHO_CHARS = 60


def short_id(job_id: str) -> str:
    """The id's random tail: ``0190f3c2-7a1b-7000-8000-00005e1a9c3f`` -> ``5e1a9c3f``."""
    return job_id[-SHORT_ID:]


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
    echo = given if len(given) <= ECHO_CHARS else given[:ECHO_CHARS] + "…"
    hint = (
        " That looks like a short id: lists show only an id's last 8 characters. Paste the"
        " whole id (a list's short id shows it on hover; a job's page shows it to copy)."
        if len(given) <= 12 and all(c in "0123456789abcdefABCDEF-" for c in given)
        else ""
    )
    raise ValueError(
        f"“{echo}” is not a job id: a job id is a UUID of 36 characters, such as"
        f" 0190f3c2-7a1b-7000-8000-00005e1a9c3f.{hint}"
    )

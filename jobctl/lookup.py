"""Which job a JOB_ID argument names, and whose it is.

A whole id is read as the user's (JobService.GetJob); a short one is looked up among the
user's jobs (ListJobs ``id_suffix``, ``jobctl.ids``). A job the user does not have may be
another user's: jobctl asks AdminService, and when the token holds the admin role the
command goes on with that job, acting for its owner (JobService calls name the owner's
user id, which the admin role may). Without the role the answer stays "not found", saying
for which user it looked and what to add.

With ``--all-users`` the lookup goes to AdminService at once.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from durable_jobs_client import AsyncJobsClient, JobNotFound, JobsError
from durable_jobs_client.protos import job_pb2

from jobctl.ids import MATCHES, ambiguous, short_id, suffix

_DENIED = {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED}


@dataclass(frozen=True)
class Located:
    """The job as read (the owner's view, or AdminService's for another user's job)."""

    job: job_pb2.Job
    # Found through AdminService: another user's job (or --all-users asked for it).
    admin_view: bool

    @property
    def owner(self) -> str:
        """The user JobService calls about the job name."""
        return self.job.user_id


async def locate(client: AsyncJobsClient, text: str, *, all_users: bool = False) -> Located:
    """The job ``text`` names (a whole or a short id). JobNotFound (exit 3) when there is
    none; a usage error when a short id matches more than one."""
    digits = suffix(text)
    if all_users:
        job_id = text if digits is None else await _admin_match(client, text, digits)
        return Located(await client.admin.get_job(job_id), admin_view=True)
    if digits is None:
        try:
            return Located(await client.get(text), admin_view=False)
        except JobsError as error:
            if error.code != grpc.StatusCode.NOT_FOUND:
                raise
        return await _elsewhere(client, text, None)
    page = await client.list_page(id_suffix=digits, page_size=MATCHES)
    found = ending(page.jobs, digits)
    if len(found) > 1:
        raise ambiguous(text, found)
    if found:
        return Located(await client.get(found[0]), admin_view=False)
    return await _elsewhere(client, text, digits)


async def _elsewhere(client: AsyncJobsClient, text: str, digits: str | None) -> Located:
    """The user has no such job: another user's, if the token may see every user's."""
    try:
        job_id = text if digits is None else await _admin_match(client, text, digits)
        return Located(await client.admin.get_job(job_id), admin_view=True)
    except JobsError as error:
        if error.code in _DENIED:
            raise not_found(text, client.user_id, every_user=False) from None
        if error.code == grpc.StatusCode.NOT_FOUND:
            raise not_found(text, client.user_id, every_user=True) from None
        raise


async def _admin_match(client: AsyncJobsClient, text: str, digits: str) -> str:
    page = await client.admin.list_jobs(id_suffix=digits, page_size=MATCHES)
    found = ending(page.jobs, digits)
    if len(found) > 1:
        raise ambiguous(text, found)
    if not found:
        raise JobNotFound(f"no job {text}", code=grpc.StatusCode.NOT_FOUND)
    return found[0]


async def own_id(client: AsyncJobsClient, text: str) -> str:
    """The whole id of one of the user's jobs (``create --depends-on``): a whole id as it
    is (the service judges it), a short one looked up among the user's jobs only."""
    digits = suffix(text)
    if digits is None:
        return text
    page = await client.list_page(id_suffix=digits, page_size=MATCHES)
    found = ending(page.jobs, digits)
    if len(found) > 1:
        raise ambiguous(text, found)
    if not found:
        raise not_found(text, client.user_id, every_user=False)
    return found[0]


async def any_id(client: AsyncJobsClient, text: str) -> str:
    """The whole id of any user's job (the admin's bulk commands): a short one looked up
    through AdminService."""
    digits = suffix(text)
    return text if digits is None else await _admin_match(client, text, digits)


def ending(jobs: Sequence[job_pb2.Job], digits: str) -> list[str]:
    """The ids of ``jobs`` that end with ``digits`` (a server that ignored the filter
    answers other jobs too: they are not matches)."""
    return [job.id for job in jobs if job.id.replace("-", "").lower().endswith(digits)]


def not_found(text: str, user_id: str, *, every_user: bool) -> JobNotFound:
    if every_user:
        message = f"no job {text} (looked among every user's jobs)"
    else:
        message = (
            f"no job {text} for user {user_id!r}; another user's job needs --user <its owner>, "
            "or a token with the admin role"
        )
    return JobNotFound(message, code=grpc.StatusCode.NOT_FOUND)


def noted(located: Located, all_users: bool) -> None:
    """A line on stderr when jobctl went on with another user's job without being told
    (``--all-users``): whose it is and in what role jobctl acts."""
    if located.admin_view and not all_users:
        print(
            f"jobctl: job {short_id(located.job.id)} belongs to user {located.owner!r}; "
            "acting on it with the admin role",
            file=sys.stderr,
        )

"""A job's graph as ``jobctl tree`` walks it: from one job, the jobs it depends on, its
children and the jobs that depend on it, and theirs, breadth first, each job read once.

The walk is bounded twice: by depth (hops from the first job) and by the number of jobs
read; what either bound left unread is kept by id, so that the view can say what it left
out. A job the service does not find (deleted by retention, or another user's) is kept
as missing instead of ending the walk; the first job not found is the caller's error.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

import grpc
from durable_jobs_client import JobsError
from durable_jobs_client.protos import job_pb2

DEFAULT_DEPTH = 20
DEFAULT_MAX_JOBS = 500
# Reads in flight at once: enough to walk 500 jobs in well under a second, few enough
# not to crowd the service.
CONCURRENCY = 8

Read = Callable[[str], Awaitable[job_pb2.Job]]


class Relation(StrEnum):
    """How a job is linked to the one it is listed under."""

    NEEDS = "needs"  # a job it depends on (Job.depends_on)
    CHILD = "child"  # a job its result made (Job.child_job_ids)
    NEEDED_BY = "needed by"  # a job that depends on it (Job.dependent_job_ids)


# The same link seen from its other end (a child's link to its parent is not walked).
REVERSE = {Relation.NEEDS: Relation.NEEDED_BY, Relation.NEEDED_BY: Relation.NEEDS}


def links(job: job_pb2.Job) -> list[tuple[Relation, str]]:
    """The job's links in the order the tree lists them: what it waits for, what it made,
    what waits for it."""
    return [
        *((Relation.NEEDS, i) for i in job.depends_on),
        *((Relation.CHILD, i) for i in job.child_job_ids),
        *((Relation.NEEDED_BY, i) for i in job.dependent_job_ids),
    ]


def unlisted(job: job_pb2.Job) -> int:
    """Links the service counted but did not list (each list stops at its first 1000)."""
    return (
        max(job.dependencies_total - len(job.depends_on), 0)
        + max(job.child_jobs_total - len(job.child_job_ids), 0)
        + max(job.dependents_total - len(job.dependent_job_ids), 0)
    )


@dataclass
class Graph:
    """What a walk found. ``jobs`` in the order they were found (breadth first);
    ``found_from`` the job and link each was first found through (the root has none)."""

    root: str
    depth: int
    max_jobs: int
    jobs: dict[str, job_pb2.Job] = field(default_factory=dict)
    found_from: dict[str, tuple[str, Relation]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    beyond_depth: list[str] = field(default_factory=list)
    beyond_max_jobs: list[str] = field(default_factory=list)

    def known(self, job_id: str) -> bool:
        """Read, or looked for and not found: the tree can name it."""
        return job_id in self.jobs or job_id in self.missing

    def unlisted(self) -> int:
        return sum(unlisted(job) for job in self.jobs.values())


async def walk(
    read: Read, root: str, depth: int = DEFAULT_DEPTH, max_jobs: int = DEFAULT_MAX_JOBS
) -> Graph:
    """Reads ``root`` (its error is the caller's), then level by level every job linked
    to a job read, up to ``depth`` links away and ``max_jobs`` jobs in all."""
    graph = Graph(root, depth, max_jobs)
    graph.jobs[root] = await read(root)
    level = [root]
    seen = {root}
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(job_id: str) -> job_pb2.Job | None:
        async with gate:
            try:
                return await read(job_id)
            except JobsError as error:
                if error.code == grpc.StatusCode.NOT_FOUND:
                    return None
                raise

    for hops in itertools.count(1):
        found: list[str] = []
        for job_id in level:
            for relation, other in links(graph.jobs[job_id]):
                if other not in seen:
                    seen.add(other)
                    graph.found_from[other] = (job_id, relation)
                    found.append(other)
        if hops > depth:
            graph.beyond_depth = found
            break
        room = max_jobs - len(graph.jobs) - len(graph.missing)
        reading = found[:room]
        graph.beyond_max_jobs.extend(found[room:])
        answers = await asyncio.gather(*(one(i) for i in reading))
        level = []
        for job_id, job in zip(reading, answers, strict=True):
            if job is None:
                graph.missing.append(job_id)
            else:
                graph.jobs[job_id] = job
                level.append(job_id)
        if not level:
            break
    return graph

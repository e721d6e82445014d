"""A job's neighbourhood as its page draws it: three layers of boxes, left to right, in an
inline SVG (``_job_graph.html``). Left: its parent and the jobs it depends on; middle: the
job; right: its children and the jobs that depend on it. Arrows run the way work flows
(parent to child, dependency to dependent): solid for parent and children, dashed for
dependencies.

Each layer shows at most ``PER_LAYER`` jobs, shared fairly between its two groups, and
after each group a "+N more" box for the rest of it. The neighbours' statuses are read with
AdminService.GetJob, ``CONCURRENCY`` at a time, for at most ``READ_BUDGET_S``: a job not
read by then, or not found, is drawn without a status ("unknown") rather than failing or
slowing the page. Everything here is data; the template escapes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

from durable_jobs_client import JobsError
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import status_name

from console.ids import short_id

PER_LAYER = 50
CONCURRENCY = 8
READ_BUDGET_S = 2.0

BOX_W, BOX_H = 190, 52
GAP_X, GAP_Y = 80, 10
TYPE_CHARS = 26  # a job type longer than this is cut (the box's tooltip has it whole)

Read = Callable[[str], Awaitable[job_pb2.Job]]


class Relation(StrEnum):
    PARENT = "parent"
    DEPENDENCY = "dependency"
    SELF = "this job"
    CHILD = "child"
    DEPENDENT = "dependent"


# Groups in the order they are stacked, by layer (left, right).
UPSTREAM = (Relation.PARENT, Relation.DEPENDENCY)
DOWNSTREAM = (Relation.CHILD, Relation.DEPENDENT)
DASHED = {Relation.DEPENDENCY, Relation.DEPENDENT}


@dataclass(frozen=True)
class Box:
    """One job (``more`` = 0) or a "+N more" box (``job_id`` empty), at ``x``, ``y``."""

    relation: Relation
    job_id: str
    job_type: str
    status: str
    waits: str
    more: int
    x: int
    y: int

    @property
    def short_id(self) -> str:
        """The id's random tail (``console.ids``)."""
        return short_id(self.job_id)

    @property
    def label(self) -> str:
        cut = self.job_type[: TYPE_CHARS - 1] + "…"
        return self.job_type if len(self.job_type) <= TYPE_CHARS else cut


@dataclass(frozen=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int
    dashed: bool


@dataclass(frozen=True)
class Graph:
    boxes: list[Box]
    edges: list[Edge]
    width: int
    height: int
    box_w: int = BOX_W
    box_h: int = BOX_H


def waits(job: job_pb2.Job) -> str:
    if not job.dependencies_pending:
        return ""
    return f"waits for {job.dependencies_pending} of {job.dependencies_total}"


def shares(sizes: list[int], room: int) -> list[int]:
    """How many of each group a layer shows: ``room`` shared evenly, what a small group
    leaves going to the others."""
    shown = [0] * len(sizes)
    while room > 0 and any(s > n for s, n in zip(sizes, shown, strict=True)):
        for i, size in enumerate(sizes):
            if room and shown[i] < size:
                shown[i] += 1
                room -= 1
    return shown


def groups(job: job_pb2.Job) -> dict[Relation, tuple[list[str], int]]:
    """Each group's ids to draw and how many more it has (the lists the service sends
    stop at 1000; ``*_total`` counts them all)."""
    whole = {
        Relation.PARENT: ([job.parent_job_id] if job.parent_job_id else [], 0),
        Relation.DEPENDENCY: (list(job.depends_on), job.dependencies_total),
        Relation.CHILD: (list(job.child_job_ids), job.child_jobs_total),
        Relation.DEPENDENT: (list(job.dependent_job_ids), job.dependents_total),
    }
    picked: dict[Relation, tuple[list[str], int]] = {}
    for layer in (UPSTREAM, DOWNSTREAM):
        sizes = [len(whole[r][0]) for r in layer]
        for relation, n in zip(layer, shares(sizes, PER_LAYER), strict=True):
            ids, total = whole[relation]
            picked[relation] = (ids[:n], max(total, len(ids)) - n)
    return picked


async def neighbours(read: Read, ids: list[str]) -> dict[str, job_pb2.Job]:
    """The jobs of ``ids`` that could be read within the budget (each once)."""
    gate = asyncio.Semaphore(CONCURRENCY)
    found: dict[str, job_pb2.Job] = {}

    async def one(job_id: str) -> None:
        async with gate:
            # Drawn as unknown when it cannot be read: gone (retention), or refused.
            with contextlib.suppress(JobsError):
                found[job_id] = await read(job_id)

    tasks = [asyncio.create_task(one(i)) for i in dict.fromkeys(ids)]
    if tasks:
        _, late = await asyncio.wait(tasks, timeout=READ_BUDGET_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    return found


async def neighbourhood(job: job_pb2.Job, read: Read) -> Graph | None:
    """The job's graph, its neighbours read with ``read``; None for a job with none."""
    picked = groups(job)
    if not any(ids or more for ids, more in picked.values()):
        return None
    found = await neighbours(read, [i for ids, _ in picked.values() for i in ids])
    return layout(job, picked, found)


def _column(
    relations: tuple[Relation, ...], picked: dict[Relation, tuple[list[str], int]]
) -> list[tuple[Relation, str, int]]:
    """A layer's boxes from top to bottom: (relation, job id or "", how many more)."""
    rows: list[tuple[Relation, str, int]] = []
    for relation in relations:
        ids, more = picked[relation]
        rows.extend((relation, i, 0) for i in ids)
        if more:
            rows.append((relation, "", more))
    return rows


def _spread(me: Box, i: int, n: int) -> int:
    """Where the ``i``-th of ``n`` arrows meets the job's box: spread down its side, so
    that their heads do not pile up on one point."""
    margin = 8
    return me.y + margin + round((BOX_H - 2 * margin) * (i + 0.5) / n)


def layout(
    job: job_pb2.Job,
    picked: dict[Relation, tuple[list[str], int]],
    found: dict[str, job_pb2.Job],
) -> Graph:
    left = _column(UPSTREAM, picked)
    right = _column(DOWNSTREAM, picked)
    middle: list[tuple[Relation, str, int]] = [(Relation.SELF, job.id, 0)]
    columns = [c for c in (left, middle, right) if c]
    height = max(len(c) for c in columns) * (BOX_H + GAP_Y) - GAP_Y
    boxes: list[Box] = []
    for n, column in enumerate(columns):
        x = n * (BOX_W + GAP_X)
        top = (height - (len(column) * (BOX_H + GAP_Y) - GAP_Y)) // 2
        placed = []
        for row, (relation, job_id, more) in enumerate(column):
            known = job if relation is Relation.SELF else found.get(job_id)
            placed.append(
                Box(
                    relation=relation,
                    job_id=job_id,
                    job_type=known.job_type if known else "",
                    status=status_name(known.status) if known else "unknown",
                    waits=waits(known) if known else "",
                    more=more,
                    x=x,
                    y=top + row * (BOX_H + GAP_Y),
                )
            )
        boxes.extend(placed)
    [me] = [b for b in boxes if b.relation is Relation.SELF]
    before = [b for b in boxes if b.relation in UPSTREAM]
    after = [b for b in boxes if b.relation in DOWNSTREAM]
    edges = [
        Edge(b.x + BOX_W, b.y + BOX_H // 2, me.x, _spread(me, i, len(before)), b.relation in DASHED)
        for i, b in enumerate(before)
    ] + [
        Edge(me.x + BOX_W, _spread(me, i, len(after)), b.x, b.y + BOX_H // 2, b.relation in DASHED)
        for i, b in enumerate(after)
    ]
    width = len(columns) * (BOX_W + GAP_X) - GAP_X
    return Graph(boxes, edges, width, height)

"""``jobctl tree``: a job's graph (``jobctl.graph``) as an indented tree, one line per job
with its short id, type and status.

Each job is drawn in full once, under the job it was first found through (breadth first:
as near the top as it can be); every other link to it is a reference line, ``(see above)``
or ``(see below)``. The link a job was found through is not drawn again from its other end
(a dependency does not list, under itself, the job it was listed under). What the walk left
unread is counted under the job that links to it, and summed up in the last line. ASCII
only, like the rest of jobctl's output.
"""

from __future__ import annotations

from typing import Any

from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import status_name

from jobctl.graph import REVERSE, Graph, Relation, links, unlisted
from jobctl.ids import short_id
from jobctl.render.text import as_dict

RELATION_WIDTH = max(len(r) for r in Relation)


def waits(job: job_pb2.Job) -> str:
    """``waits for 2 of 3`` while a job waits for its dependencies."""
    if not job.dependencies_pending:
        return ""
    return f"waits for {job.dependencies_pending} of {job.dependencies_total}"


def job_line(job: job_pb2.Job) -> str:
    parts = [short_id(job.id), job.job_type, status_name(job.status), waits(job)]
    return "  ".join(p for p in parts if p)


def job_tree(graph: Graph) -> str:
    root = graph.jobs[graph.root]
    head = job_line(root)
    if root.parent_job_id:
        head += f"  (child of {short_id(root.parent_job_id)})"
    lines = [head]
    drawn = {graph.root}

    def draw(job: job_pb2.Job, indent: str) -> None:
        came = graph.found_from.get(job.id)
        shown = [
            (relation, other)
            for relation, other in links(job)
            if graph.known(other)
            and not (came and (REVERSE.get(came[1]), came[0]) == (relation, other))
        ]
        left_out = unlisted(job) + sum(1 for _, other in links(job) if not graph.known(other))
        rows = len(shown) + (1 if left_out else 0)
        for n, (relation, other) in enumerate(shown):
            last = n == rows - 1
            branch = f"{indent}{'`-- ' if last else '|-- '}{relation.value.ljust(RELATION_WIDTH)}  "
            below = f"{indent}{'    ' if last else '|   '}"
            if other in graph.missing:
                lines.append(f"{branch}{short_id(other)}  (not found)")
            elif other in drawn or graph.found_from.get(other) != (job.id, relation):
                where = "see above" if other in drawn else "see below"
                lines.append(f"{branch}{short_id(other)}  ({where})")
            else:
                drawn.add(other)
                lines.append(branch + job_line(graph.jobs[other]))
                draw(graph.jobs[other], below)
        if left_out:
            lines.append(f"{indent}`-- ... {left_out} more not shown")

    draw(root, "")
    if summary := left_out_summary(graph):
        lines.append(summary)
    return "\n".join(lines)


def left_out_summary(graph: Graph) -> str:
    """The last line: what the bounds left out, and how to see more."""
    parts = []
    if graph.beyond_depth:
        parts.append(f"{len(graph.beyond_depth)} jobs deeper than --depth {graph.depth}")
    if graph.beyond_max_jobs:
        parts.append(f"{len(graph.beyond_max_jobs)} jobs past --max-jobs {graph.max_jobs}")
    if unlisted_links := graph.unlisted():
        parts.append(f"{unlisted_links} links the service does not list (the first 1000 each)")
    if not parts:
        return ""
    return f"({len(graph.jobs)} jobs shown; left out: {', '.join(parts)})"


def tree_job(job: job_pb2.Job) -> job_pb2.Job:
    """The job as ``tree -o json|jsonl`` gives it: what places it in the graph, not its
    output, artifacts or timeline."""
    return job_pb2.Job(
        id=job.id,
        job_type=job.job_type,
        status=job.status,
        parent_job_id=job.parent_job_id,
        child_job_ids=job.child_job_ids,
        child_jobs_total=job.child_jobs_total,
        depends_on=job.depends_on,
        dependencies_total=job.dependencies_total,
        dependencies_pending=job.dependencies_pending,
        dependency_policy=job.dependency_policy,
        dependent_job_ids=job.dependent_job_ids,
        dependents_total=job.dependents_total,
    )


def tree_json(graph: Graph) -> dict[str, Any]:
    """``tree -o json``: the jobs read (as ``tree_job``), breadth first from the root, and
    the ids the walk did not read."""
    return {
        "root_job_id": graph.root,
        "jobs": [as_dict(tree_job(job)) for job in graph.jobs.values()],
        "not_found": list(graph.missing),
        "left_out": {
            "beyond_depth": list(graph.beyond_depth),
            "beyond_max_jobs": list(graph.beyond_max_jobs),
            "unlisted_links": graph.unlisted(),
        },
    }

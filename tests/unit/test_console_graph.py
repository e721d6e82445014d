"""The console's job graph (``console.graph`` and ``_job_graph.html``) against the fake
AdminService.GetJob of ``durable_jobs_client.testing``: one box per neighbour with its
status and a link to its page, the layers and arrows, the per-layer bound and its "+N
more", reads bounded in number, in concurrency and in time, and a hostile job type
escaped. (Against a real job_service:
tests/integration/test_console_graph.py.)"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field

import pytest
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.testing import FakeJobService
from markupsafe import escape

from console import graph
from console.render import environment

HOSTILE = '"><script>alert(1)</script><svg onload=alert(2)>&amp;'
SUCCEEDED = job_pb2.JOB_STATUS_SUCCEEDED
RUNNING = job_pb2.JOB_STATUS_RUNNING
FAILED = job_pb2.JOB_STATUS_FAILED
CREATED = job_pb2.JOB_STATUS_CREATED


def jid(name: str) -> str:
    return f"0190f3c2-7a1b-7000-8000-{name.rjust(12, '0')}"


@dataclass
class Reading:
    """AdminService.GetJob of a fake job service, watched: each read takes a moment,
    the most at once are counted, and the ids in ``hang`` never answer."""

    service: FakeJobService
    in_flight: int = 0
    most: int = 0
    hang: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.service.on("admin.get_job", self.read)
        self.get_job = self.service.client().admin.get_job

    @property
    def reads(self) -> list[str]:
        return [c["job_id"] for c in self.service.asked("admin.get_job")]

    async def read(self, job_id: str) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.001)
            if job_id in self.hang:
                await asyncio.Event().wait()
        finally:
            self.in_flight -= 1


def neighbour(name: str, status: job_pb2.JobStatus, job_type: str = "synthetic") -> job_pb2.Job:
    return job_pb2.Job(id=jid(name), job_type=job_type, status=status)


def the_job() -> job_pb2.Job:
    """A join: a child of p, waiting for d1 and d2, with children c1..c3 and dependent e1."""
    return job_pb2.Job(
        id=jid("me"),
        job_type="merge",
        status=CREATED,
        parent_job_id=jid("p"),
        depends_on=[jid("d1"), jid("d2")],
        dependencies_total=2,
        dependencies_pending=1,
        dependency_policy=job_pb2.DEPENDENCY_POLICY_RUN,
        child_job_ids=[jid(f"c{i}") for i in (1, 2, 3)],
        child_jobs_total=3,
        dependent_job_ids=[jid("e1")],
        dependents_total=1,
    )


def admin_of(*jobs: job_pb2.Job) -> Reading:
    return Reading(FakeJobService(jobs={j.id: j for j in jobs}))


def neighbours() -> Reading:
    return admin_of(
        neighbour("p", SUCCEEDED, "split"),
        neighbour("d1", SUCCEEDED),
        neighbour("d2", RUNNING),
        neighbour("c1", FAILED),
        neighbour("c2", SUCCEEDED),
        neighbour("c3", RUNNING),
        neighbour("e1", CREATED, "report"),
    )


def page(job: job_pb2.Job, drawn: graph.Graph | None) -> str:
    template = environment().get_template("job.html")
    return template.render(job=job, graph=drawn, csrf="", signed_in=True, nav="jobs")


NODE = re.compile(
    r'<a href="/jobs/([^"]+)" class="node s-(\w+)" data-job-id="[^"]+" '
    r'data-relation="(\w+)"'
)


async def test_each_neighbour_is_a_box_with_its_status_linking_to_its_page() -> None:
    job = the_job()
    admin = neighbours()

    drawn = await graph.neighbourhood(job, admin.get_job)
    shown = page(job, drawn)

    assert '<svg id="job-graph"' in shown
    boxes = {(jid_, status, relation) for jid_, status, relation in NODE.findall(shown)}
    assert boxes == {
        (jid("p"), "succeeded", "parent"),
        (jid("d1"), "succeeded", "dependency"),
        (jid("d2"), "running", "dependency"),
        (jid("c1"), "failed", "child"),
        (jid("c2"), "succeeded", "child"),
        (jid("c3"), "running", "child"),
        (jid("e1"), "created", "dependent"),
    }
    assert 'class="node self s-created"' in shown
    assert "created · waits for 1 of 2" in shown
    assert shown.count("<line ") == 7
    assert shown.count('class="edge dashed"') == 3  # d1, d2 and e1
    assert sorted(admin.reads) == sorted(i for i, _, _ in boxes)  # each read once
    assert 'id="dependency-policy">run<' in shown
    assert "1 job waits for this one" in shown


async def test_the_layers_run_left_to_right_with_the_job_in_the_middle() -> None:
    drawn = await graph.neighbourhood(the_job(), neighbours().get_job)
    assert drawn is not None

    x = {str(b.relation): b.x for b in drawn.boxes}
    assert x["parent"] == x["dependency"] < x["this job"] < x["child"] == x["dependent"]
    ys = [b.y for b in drawn.boxes if b.x == x["child"]]
    assert ys == sorted(ys) and len(set(ys)) == 4  # stacked, not overlapping
    assert all(b.x + drawn.box_w <= drawn.width for b in drawn.boxes)
    assert all(b.y + drawn.box_h <= drawn.height for b in drawn.boxes)


async def test_a_hostile_job_type_is_escaped_everywhere() -> None:
    job = job_pb2.Job(id=jid("me"), job_type=HOSTILE, status=RUNNING, child_job_ids=[jid("c")])
    admin = admin_of(neighbour("c", RUNNING, HOSTILE))

    shown = page(job, await graph.neighbourhood(job, admin.get_job))

    assert "<script>" not in shown and "<svg onload" not in shown
    assert escape(HOSTILE[: graph.TYPE_CHARS - 1]) in shown  # the box's cut label
    assert escape(HOSTILE) in shown  # the tooltip, whole
    assert shown.count("<svg") == 1


async def test_a_layer_shows_at_most_its_bound_and_says_how_many_more() -> None:
    children = [jid(f"c{i}") for i in range(1000)]
    job = job_pb2.Job(
        id=jid("me"),
        status=RUNNING,
        child_job_ids=children,
        child_jobs_total=1500,
        dependent_job_ids=[jid("e1"), jid("e2")],
        dependents_total=2,
    )
    admin = admin_of(*(neighbour(f"c{i}", SUCCEEDED) for i in range(1000)))

    shown = page(job, await graph.neighbourhood(job, admin.get_job))

    assert shown.count('data-relation="child"') == graph.PER_LAYER - 2 + 1  # + its "more" box
    assert shown.count('data-relation="dependent"') == 2
    assert f"+{1500 - graph.PER_LAYER + 2} more children" in shown
    assert len(admin.reads) == graph.PER_LAYER
    assert admin.most <= graph.CONCURRENCY


async def test_a_neighbour_gone_or_too_slow_is_drawn_unknown_and_the_page_still_renders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(graph, "READ_BUDGET_S", 0.2)
    admin = neighbours()
    del admin.service.jobs[jid("d1")]  # deleted by retention
    admin.hang.add(jid("c2"))

    shown = page(the_job(), await graph.neighbourhood(the_job(), admin.get_job))

    found = {i: status for i, status, _ in NODE.findall(shown)}
    assert found[jid("d1")] == found[jid("c2")] == "unknown"
    assert found[jid("c1")] == "failed"


async def test_a_job_without_links_draws_no_graph() -> None:
    job = job_pb2.Job(id=jid("me"), job_type="synthetic", status=RUNNING)
    admin = admin_of()

    assert await graph.neighbourhood(job, admin.get_job) is None
    assert "<svg" not in page(job, None) and "Graph" not in page(job, None)
    assert admin.reads == []


def test_a_layer_is_shared_evenly_and_what_a_small_group_leaves_goes_to_the_other() -> None:
    assert graph.shares([1000, 1000], 50) == [25, 25]
    assert graph.shares([1000, 3], 50) == [47, 3]
    assert graph.shares([1, 2], 50) == [1, 2]

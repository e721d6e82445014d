"""The job page's graph against a real job_service: a join made with CreateJob
``depends_on`` drawn from the join (a box per dependency, with the status the service
reads for it) and from a dependency (the join as its dependent, still waiting). The
layout, the bounds and the escaping: tests/unit/test_console_graph.py."""

from __future__ import annotations

import re

import httpx

from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.integration.test_console import admin, console
from tests.support.shared_stack import SharedStack, shared_stack

__all__ = ["admin", "console", "shared_stack"]

BOX = re.compile(
    r'<a href="/jobs/([^"]+)" class="node s-(\w+)" data-job-id="[^"]+" data-relation="(\w+)"'
)


async def test_a_join_is_drawn_with_each_dependency_and_each_dependency_with_the_join(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    stack = shared_stack
    made = await stack.client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id="alice",
            job_type="synthetic",
            input=struct_from_dict({}),
            idempotency_key="console-graph-join",
            depends_on=[stack.succeeded, stack.running, stack.cancelled],
            dependency_policy=job_pb2.DEPENDENCY_POLICY_RUN,
        )
    )
    join = made.job.id

    page = await admin.get(f"/jobs/{join}")

    assert page.status_code == 200, page.text
    assert '<svg id="job-graph"' in page.text
    assert set(BOX.findall(page.text)) == {
        (stack.succeeded, "succeeded", "dependency"),
        (stack.running, "running", "dependency"),
        (stack.cancelled, "cancelled", "dependency"),
    }
    assert 'class="node self s-created"' in page.text
    assert "created · waits for 1 of 3" in page.text
    assert 'id="dependency-policy">run<' in page.text

    dependency = await admin.get(f"/jobs/{stack.running}")

    assert dependency.status_code == 200, dependency.text
    assert set(BOX.findall(dependency.text)) == {(join, "created", "dependent")}
    assert "1 job waits for this one" in dependency.text
    assert "app;dur=" in dependency.headers["server-timing"]

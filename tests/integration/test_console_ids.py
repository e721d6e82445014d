"""Job ids in the console against a real job_service: forty jobs created together (one
CreateJobs call, so their version-7 ids share the time prefix) are forty distinguishable
short ids in the jobs list, each the id's tail with the whole id as its title; the "go to
job" box opens a job by its whole id, and a malformed or unknown one is a 4xx page, never a
500. The parsing, the job page's copyable id and the escaping: tests/unit/test_console_ids.py."""

from __future__ import annotations

import re

import httpx

from console.app import Console
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.integration.test_console import admin, console, http
from tests.support.shared_stack import SharedStack, shared_stack

__all__ = ["admin", "console", "shared_stack"]

ROW = re.compile(
    r'<tr id="job-([0-9a-f-]{36})"><td><a href="/jobs/\1" title="\1"><code>([0-9a-f]+)</code>'
)


async def test_forty_jobs_created_together_show_forty_distinguishable_ids(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    made = await shared_stack.client.jobs.CreateJobs(
        jpb.CreateJobsRequest(
            requests=[
                jpb.CreateJobRequest(
                    user_id="burst", job_type="synthetic", input=struct_from_dict({})
                )
                for _ in range(40)
            ]
        )
    )
    assert not [r.error for r in made.results if r.HasField("error")]
    ids = [r.response.job.id for r in made.results]
    assert len(set(ids)) == 40
    # The premise: one call's ids share their first 8 characters (the time; two values
    # only if the call straddled a 65-second boundary of the prefix).
    assert len({i[:8] for i in ids}) <= 2

    page = await admin.get("/jobs", params={"user_id": "burst", "page_size": "100"})

    assert page.status_code == 200
    rows = ROW.findall(page.text)
    assert sorted(full for full, _ in rows) == sorted(ids)
    assert all(shown == full[-8:] for full, shown in rows)
    assert len({shown for _, shown in rows}) == 40


async def test_the_go_to_box_opens_a_job_and_refuses_what_is_not_one(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    job_id = shared_stack.succeeded

    went = await admin.get("/jobs/go", params={"id": f"  {job_id.upper()}  "})
    assert went.status_code == 303
    assert went.headers["location"] == f"/jobs/{job_id}"
    opened = await admin.get(went.headers["location"])
    assert opened.status_code == 200
    assert f'value="{job_id}" readonly' in opened.text
    assert f"<title>Job {job_id[-8:]} · " in opened.text

    # the end of an id finds the one job it ends (job_service's id_suffix filter)
    for typed in (job_id[-8:], job_id[-6:].upper(), job_id[-17:]):
        short = await admin.get("/jobs/go", params={"id": typed})
        assert short.status_code == 303, typed
        assert short.headers["location"] == f"/jobs/{job_id}"
    none = await admin.get("/jobs/go", params={"id": "000000000000"})
    assert none.status_code == 404
    assert "No job ends with “000000000000”." in none.text
    bad = await admin.get("/jobs/go", params={"id": "01a2x"})
    assert bad.status_code == 400
    # a job's address needs the whole id
    short = await admin.get(f"/jobs/{job_id[-8:]}")
    assert short.status_code == 400
    assert "looks like a short id" in short.text

    unknown = await admin.get("/jobs/go", params={"id": "00000000-0000-7000-8000-000000000000"})
    assert unknown.status_code == 303
    gone = await admin.get(unknown.headers["location"])
    assert gone.status_code == 404

    cut = await admin.get(f"/jobs/{job_id[:-1]}")
    assert cut.status_code == 400
    assert "is not a job id" in cut.text


async def test_the_go_to_box_needs_a_session(console: Console) -> None:
    async with http(console) as client:
        went = await client.get("/jobs/go", params={"id": "x"})
    assert went.status_code == 303
    assert went.headers["location"].startswith("/signin?next=")

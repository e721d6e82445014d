"""What an operator does in the console beyond one job (issue 27), against a real
job_service: bulk cancel and retry by filter (a dry run that changes nothing, then the
confirmed call, paged to the end, each job's timeline naming the operator), schedules
(listed by user, their next fire times and runs, pause, resume, trigger, delete behind
confirmations), signals on a job's page (names, never payloads), and the usage page (a
chart per day, tables by model, job type and user, exact costs).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import asyncpg
import httpx
import pytest

from console.pages import bulk
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import struct_from_dict
from tests.integration.test_console import admin, console, csrf_of, failed_job
from tests.support.shared_stack import SharedStack, shared_stack

__all__ = ["admin", "console", "shared_stack"]

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
# The principal of the admin token the tests sign in with (tests/support/stack.py).
OPERATOR = "test-admin"


async def fetch(database_url: str, query: str, *args: object) -> list[asyncpg.Record]:
    db = await asyncpg.connect(database_url)
    try:
        return await db.fetch(query, *args)
    finally:
        await db.close()


def hidden(page: str) -> dict[str, str]:
    """The hidden fields of a page's form (the confirmation's carried filter)."""
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page))


def shown(page: str, element_id: str) -> str:
    found = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>(.*?)</\1>', page, re.S)
    assert found is not None, f"no #{element_id}"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(2)).split())


async def test_bulk_retry_is_dry_run_then_confirmed_and_names_the_operator(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    failed = [await failed_job(shared_stack, "bulk-ursula") for _ in range(3)]
    query = {"user_id": "bulk-ursula", "status": "failed"}

    listing = await admin.get("/jobs", params=query)
    assert 'id="bulk-retry" href="/bulk/retry?' in listing.text
    dry = await admin.get("/bulk/retry", params=query)
    main = dry.text.split("<main>")[1]
    assert dry.status_code == 200
    assert shown(dry.text, "question").startswith("3 job(s) would be retried")
    assert sorted(re.findall(r'title="([0-9a-f-]{36})"[^>]*><code>', dry.text)) == sorted(failed)
    retried = "SELECT count(*) AS n FROM jobs WHERE retried_from_job_id = ANY($1::uuid[])"
    assert (await fetch(shared_stack.database_url, retried, failed))[0]["n"] == 0

    form = hidden(main)
    assert {k: form[k] for k in query} == query  # the confirmation carries the filter
    done = await admin.post("/bulk/retry", data=form)
    assert done.status_code == 200
    assert shown(done.text, "bulk-done") == "3"
    assert 'id="bulk-finished"' in done.text

    assert (await fetch(shared_stack.database_url, retried, failed))[0]["n"] == 3
    reasons = await fetch(
        shared_stack.database_url,
        "SELECT e.reason FROM job_events e JOIN jobs j ON j.id = e.job_id"
        " WHERE j.retried_from_job_id = ANY($1::uuid[]) OR j.id = ANY($1::uuid[])",
        failed,
    )
    assert sum(r["reason"] == f"admin {OPERATOR}: console bulk retry" for r in reasons) >= 3


async def test_bulk_cancel_pages_to_the_end_with_the_operators_reason(
    admin: httpx.AsyncClient, shared_stack: SharedStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = shared_stack.client
    queued = [(await client.create(user_id="bulk-victor")).job.id for _ in range(5)]
    # two jobs a call, and a progress page after each call
    monkeypatch.setattr(bulk, "BATCH", 2)
    monkeypatch.setattr(bulk, "STEP_S", 0.0)

    dry = await admin.get("/bulk/cancel", params={"user_id": "bulk-victor"})
    assert shown(dry.text, "bulk-matched").startswith("Matched now: 5")
    form = hidden(dry.text.split("<main>")[1]) | {"reason": "provider outage"}
    steps = 0
    while True:
        page = await admin.post("/bulk/cancel", data=form)
        assert page.status_code == 200
        steps += 1
        if 'id="bulk-finished"' in page.text:
            break
        assert 'id="bulk-more"' in page.text and steps < 5
        form = hidden(page.text.split("<main>")[1])
        assert form["user_id"] == "bulk-victor" and form["page_token"]
    assert steps == 3
    assert shown(page.text, "bulk-done") == "5"

    rows = await fetch(
        shared_stack.database_url,
        "SELECT j.status, e.reason FROM jobs j JOIN job_events e ON e.job_id = j.id"
        " WHERE j.id = ANY($1::uuid[]) AND e.to_status = 'cancelled'",
        queued,
    )
    assert len(rows) == 5
    assert {(r["status"], r["reason"]) for r in rows} == {
        ("cancelled", f"admin {OPERATOR}: provider outage")
    }


async def test_a_bulk_action_needs_a_filter_and_the_csrf_token(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    assert (await admin.get("/bulk/cancel")).status_code == 400
    job = (await shared_stack.client.create(user_id="bulk-walt")).job
    refused = await admin.post("/bulk/cancel", data={"user_id": "bulk-walt"})
    assert refused.status_code == 403
    status = await fetch(shared_stack.database_url, "SELECT status FROM jobs WHERE id = $1", job.id)
    assert status[0]["status"] == "queued"


async def make_schedule(shared_stack: SharedStack, user_id: str) -> spb.Schedule:
    spec = spb.ScheduleSpec(
        cron="0 9 * * *",
        time_zone="Europe/Berlin",
        job_template=spb.JobTemplate(
            job_type="synthetic", input=struct_from_dict({"sleep_ms": 10})
        ),
    )
    made = await shared_stack.client.schedules.CreateSchedule(
        spb.CreateScheduleRequest(user_id=user_id, spec=spec, idempotency_key="console-test")
    )
    return made.schedule


async def confirmed(admin: httpx.AsyncClient, path: str) -> httpx.Response:
    """``path``'s confirmation page, then its form sent."""
    page = await admin.get(path)
    assert page.status_code == 200, page.text
    assert 'id="confirm"' in page.text
    main = page.text.split("<main>")[1]  # not the header's sign-out form
    action = re.search(r'<form method="post" action="([^"]+)"', main)
    assert action is not None
    return await admin.post(action.group(1), data=hidden(main))


async def test_a_schedule_is_found_by_user_paused_triggered_and_deleted(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    schedule = await make_schedule(shared_stack, "sched-sam")
    get = spb.GetScheduleRequest(schedule_id=schedule.id, user_id="sched-sam")

    assert 'id="schedules-user"' in (await admin.get("/schedules")).text
    listed = await admin.get("/schedules", params={"user_id": "sched-sam"})
    assert f'id="schedule-{schedule.id}"' in listed.text
    page = await admin.get(f"/schedules/{schedule.id}", params={"user_id": "sched-sam"})
    assert page.status_code == 200
    assert len(re.findall(r"<li>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</li>", page.text)) == 5
    assert "Europe/Berlin" in page.text

    paused = await confirmed(admin, f"/schedules/{schedule.id}/pause?user_id=sched-sam")
    assert paused.status_code == 303, paused.text
    assert paused.headers["location"].startswith(f"/schedules/{schedule.id}?"), paused.headers
    assert (await shared_stack.client.schedules.GetSchedule(get)).schedule.paused
    page = await admin.get(paused.headers["location"])
    assert shown(page.text, "notice") == "Schedule paused."
    assert shown(page.text, "updated-by") == "test-admin"  # the signed-in operator
    assert "None while paused." in page.text

    triggered = await confirmed(admin, f"/schedules/{schedule.id}/trigger?user_id=sched-sam")
    assert triggered.status_code == 303
    page = await admin.get(triggered.headers["location"])
    job_id = re.search(r'title="([0-9a-f-]{36})" id="triggered-job"', page.text)
    assert job_id is not None
    runs = re.findall(r"<td>triggered</td>", page.text)
    assert len(runs) == 1
    job_page = await admin.get(f"/jobs/{job_id.group(1)}")
    link = re.search(r'<a id="schedule-link" href="([^"]+)"', job_page.text)
    assert link is not None
    assert link.group(1) == f"/schedules/{schedule.id}?user_id=sched-sam"

    resumed = await confirmed(admin, f"/schedules/{schedule.id}/resume?user_id=sched-sam")
    assert not (await shared_stack.client.schedules.GetSchedule(get)).schedule.paused
    assert resumed.status_code == 303

    deleted = await confirmed(admin, f"/schedules/{schedule.id}/delete?user_id=sched-sam")
    assert deleted.status_code == 303
    listed = await admin.get(deleted.headers["location"])
    assert f'id="schedule-{schedule.id}"' not in listed.text
    assert 'id="no-schedules"' in listed.text
    gone = await admin.get(f"/schedules/{schedule.id}", params={"user_id": "sched-sam"})
    assert gone.status_code == 404


async def test_a_schedule_action_needs_the_csrf_token(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    schedule = await make_schedule(shared_stack, "sched-tom")
    refused = await admin.post(f"/schedules/{schedule.id}/pause", data={"user_id": "sched-tom"})
    assert refused.status_code == 403
    get = spb.GetScheduleRequest(schedule_id=schedule.id, user_id="sched-tom")
    assert not (await shared_stack.client.schedules.GetSchedule(get)).schedule.paused


async def test_a_signal_is_sent_as_the_owner_and_shown_without_its_payload(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    job = (await shared_stack.client.create(user_id="sig-sue")).job
    csrf = await csrf_of(admin, f"/jobs/{job.id}")
    sent = await admin.post(
        f"/jobs/{job.id}/signal",
        data={"csrf": csrf, "name": "approve", "payload": '{"secret": "hunter3"}'},
    )
    assert sent.status_code == 303
    page = await admin.get(sent.headers["location"])
    assert shown(page.text, "signal-1").startswith("1 approve 20")
    assert "hunter3" not in page.text
    stored = await shared_stack.client.jobs.GetJob(
        jpb.GetJobRequest(job_id=job.id, user_id="sig-sue")
    )
    assert [s.name for s in stored.job.signals] == ["approve"]

    bad = await admin.post(
        f"/jobs/{job.id}/signal", data={"csrf": csrf, "name": "approve", "payload": "[1"}
    )
    assert bad.status_code == 400
    assert 'id="signal-2"' not in (await admin.get(f"/jobs/{job.id}")).text


async def test_the_usage_page_charts_each_day_and_tables_exact_costs(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    job = (await shared_stack.client.create(user_id="usage-uma")).job
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    db = await asyncpg.connect(shared_stack.database_url)
    try:
        for n, (days_ago, cost) in enumerate(((2, "1.234567"), (1, "0.000123"), (1, "0.5"))):
            await db.execute(
                "INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode,"
                " input_tokens, output_tokens, cost_usd, created_at, call_id, reused)"
                " VALUES ($1, 1, 'fake', 'fake-primary', 'platform', 100, 10, $2, $3, $4,"
                " false)",
                job.id,
                Decimal(cost),
                today - timedelta(days=days_ago) + timedelta(hours=1),
                f"console-call-{n}",
            )
    finally:
        await db.close()

    page = await admin.get("/usage", params={"user_id": "usage-uma"})
    assert page.status_code == 200
    bars = re.findall(r'<rect class="bar" data-day="([0-9-]+)"[^>]*height="([0-9.]+)"', page.text)
    assert len(bars) == 30  # a slot per day of the default range
    heights = {day: float(h) for day, h in bars}
    two_days_ago = (today - timedelta(days=2)).date().isoformat()
    yesterday = (today - timedelta(days=1)).date().isoformat()
    assert heights[two_days_ago] > heights[yesterday] > 0
    assert sum(h > 0 for h in heights.values()) == 2
    assert shown(page.text, "usage-cost") == "$1.73"  # 1.234567 + 0.000123 + 0.5
    model = shown(page.text, "usage-by-model")
    assert "fake / fake-primary $1.73 3 0 300 30" in model
    assert "usage-uma $1.73" in shown(page.text, "usage-by-user")
    assert "synthetic $1.73" in shown(page.text, "usage-by-job_type")
    assert "<script" not in page.text.split("</head>")[1]  # no script, the chart is SVG
    assert (await admin.get("/usage", params={"start": "2026-13-01"})).status_code == 400


def test_the_statuses_the_bulk_pages_filter_by_are_the_enums() -> None:
    assert job_pb2.JOB_STATUS_FAILED  # the status a filter's "failed" becomes

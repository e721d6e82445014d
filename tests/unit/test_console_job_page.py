"""What a job's page shows an operator (issue 31): its input (or why not), retries linked
both ways with no second "Retry…" on a retried job, the error labelled with its attempt,
numbers as their JSON said (29, not 29.0), the output hash's scheme and 12 hex digits, costs
to 4 significant digits, times in UTC (the timeline to the millisecond), how long the job
waited and ran and each attempt ran, on which worker, and when the next attempt is due.

The live stream re-renders the page's changing parts with the page's own partials; a test
here holds the two to the same HTML. Pages run over HTTP (httpx's ASGI transport, no socket)
against the fake AdminService of ``durable_jobs_client.testing``; against a real job_service:
tests/integration/test_console_operator.py.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.testing import FakeJobService
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from console import timing
from console.app import Console
from console.pages.jobs import followed
from console.render import cost, environment, hash_label, size, when, when_ms
from console.sessions import SESSION_COOKIE
from console.settings import ConsoleSettings
from tests.unit.test_console_ids import SESSION_ID, admin, fake, job, v7_id

__all__ = ["admin", "fake"]

FAILED = job_pb2.JOB_STATUS_FAILED
RUNNING = job_pb2.JOB_STATUS_RUNNING
QUEUED = job_pb2.JOB_STATUS_QUEUED
RETRYING = job_pb2.JOB_STATUS_RETRYING
T0 = datetime(2026, 12, 3, 9, 15, 30, 250_000, tzinfo=UTC)
DASH = "\u2013"  # what a fact not yet known shows
HASH = "jcs:sha256:1a2b3c4d5e6f" + "0" * 52


def at(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(T0 + timedelta(seconds=seconds))
    return stamp


def struct(value: dict[str, Any]) -> Struct:
    message = Struct()
    message.update(value)
    return message


def event(
    to: job_pb2.JobStatus, seconds: float, attempt: int = 0, worker: str = "", reason: str = ""
) -> job_pb2.JobEvent:
    return job_pb2.JobEvent(
        to_status=to, at=at(seconds), attempt=attempt, worker_id=worker, reason=reason
    )


def part(page: str, element_id: str) -> str:
    """The element of ``element_id`` in ``page``, whole (from its tag to its closing tag)."""
    found = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>.*?</\1>', page, re.S)
    assert found is not None, f"no #{element_id}"
    return found.group(0)


def text(html: str) -> str:
    """What a reader sees of ``html``: the tags dropped, spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def second_attempt_running() -> job_pb2.Job:
    """Attempt 1 failed on worker-a; attempt 2 runs on worker-b."""
    job_id = v7_id()
    return job(
        job_id,
        status=RUNNING,
        attempt_count=2,
        max_attempts=3,
        created_at=at(0),
        started_at=at(1.5),
        updated_at=at(9),
        error_code="PROVIDER_TIMEOUT",
        error_message="The model did not answer in time.",
        error_attempt=1,
        worker_id="worker-b",
        events=[
            event(job_pb2.JOB_STATUS_CREATED, 0),
            event(QUEUED, 0.012),
            event(RUNNING, 1.5, 1, "worker-a"),
            event(RETRYING, 5.75, 1, "worker-a", "PROVIDER_TIMEOUT"),
            event(QUEUED, 7.0, 1),
            event(RUNNING, 7.125, 2, "worker-b"),
        ],
        events_total=6,
    )


async def test_the_input_is_shown_with_whole_numbers_and_withheld_fields_named(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    job_id = v7_id()
    fake.jobs[job_id] = job(
        job_id,
        status=FAILED,
        input=struct({"sleep_ms": 800, "ratio": 0.5, "items": [1, 2.25], "deep": {"n": 3}}),
        input_state=job_pb2.INPUT_STATE_SHOWN,
        input_bytes=64,
        input_withheld_fields=["api_key", "notes"],
    )

    page = (await admin.get(f"/jobs/{job_id}")).text

    shown = html.unescape(part(page, "input"))
    assert '"sleep_ms": 800\n' in shown and '"n": 3' in shown and '"ratio": 0.5' in shown
    assert "800.0" not in shown and "3.0" not in shown and "2.25" in shown
    assert text(part(page, "input-withheld")) == "api_key : withheld notes : withheld"


@pytest.mark.parametrize(
    ("state", "says"),
    [
        (job_pb2.INPUT_STATE_TOO_LARGE, "too large to show here: 68.8 KiB (70,400 bytes)."),
        (job_pb2.INPUT_STATE_REMOVED, "Removed with the job's snapshot"),
        (job_pb2.INPUT_STATE_UNSPECIFIED, "does not send inputs"),
    ],
)
async def test_an_input_not_shown_says_why(
    admin: httpx.AsyncClient, fake: FakeJobService, state: job_pb2.InputState, says: str
) -> None:
    job_id = v7_id()
    fake.jobs[job_id] = job(job_id, input_state=state, input_bytes=70_400)

    page = (await admin.get(f"/jobs/{job_id}")).text

    assert says in part(page, "input-note")
    assert 'id="input"' not in page


async def test_output_and_artifacts_show_whole_numbers_and_the_hash_by_its_scheme_and_12_digits(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    job_id = v7_id()
    fake.jobs[job_id] = job(
        job_id,
        status=job_pb2.JOB_STATUS_SUCCEEDED,
        output=struct({"score": 29, "mean": 29.5, "big": 2**53}),
        output_hash=HASH,
        artifacts=[job_pb2.Artifact(artifact_type="chunk", payload=struct({"tokens": 1200}))],
    )

    page = (await admin.get(f"/jobs/{job_id}")).text

    output = html.unescape(part(page, "output-json"))
    assert '"score": 29\n' in output and '"mean": 29.5' in output and "29.0" not in output
    assert f'"big": {2**53}' in output
    artifact = part(page, "artifact-0")
    assert '"tokens": 1200\n' in html.unescape(artifact) and "1200.0" not in artifact
    assert f'<code id="output-hash-label" title="{HASH}">jcs:sha256:1a2b3c4d5e6f…</code>' in page
    assert re.search(rf'<input id="output-hash"[^>]* value="{HASH}" readonly', page)
    assert 'data-copy="output-hash"' in page


@pytest.mark.parametrize(
    ("usd", "shown"),
    [
        (0.0, "$0"),
        (0.00012345678, "$0.0001235"),
        (0.0000123, "$0.0000123"),
        (0.5, "$0.5"),
        (12.3456, "$12.35"),
        (1234.5, "$1,234"),
    ],
)
def test_costs_have_four_significant_digits(usd: float, shown: str) -> None:
    assert cost(usd) == shown


def test_hash_labels_keep_the_scheme_and_12_hex_digits() -> None:
    assert hash_label(HASH) == "jcs:sha256:1a2b3c4d5e6f…"
    assert hash_label("abc") == "abc"
    assert size(900) == "900 bytes" and size(3 * 1024**2) == "3.0 MiB (3,145,728 bytes)"


def test_times_say_utc_and_the_timeline_has_milliseconds() -> None:
    assert when(at(0)) == "2026-12-03 09:15:30 UTC"
    assert when_ms(at(0.012)) == "2026-12-03 09:15:30.262 UTC"
    assert when(Timestamp()) == ""


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.012, "12 ms"), (4.25, "4.2 s"), (4.0, "4 s"), (192, "3 min 12 s"), (7500, "2 h 5 min")],
)
def test_durations_are_written_in_two_units_at_most(seconds: float, shown: str) -> None:
    assert timing.span(seconds) == shown


def test_a_time_to_come_says_how_far_off_it_is() -> None:
    now = T0
    assert timing.until(at(4), now) == "in 4 s"
    assert timing.until(at(-1), now) == "due now"
    assert timing.until(Timestamp(), now) == ""


async def test_a_running_second_attempt_labels_the_first_attempts_error(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    running = second_attempt_running()
    fake.jobs[running.id] = running

    page = (await admin.get(f"/jobs/{running.id}")).text
    listing = (await admin.get("/jobs")).text

    error = part(page, "job-error")
    assert text(part(error, "error-title")) == "Error of attempt 1 of 3"
    assert text(part(error, "error-earlier")) == "From an earlier attempt: attempt 2 is running."
    assert "PROVIDER_TIMEOUT" in part(error, "error-code")
    row = part(listing, f"job-{running.id}")
    assert "PROVIDER_TIMEOUT of attempt 1" in text(row)
    # a listing's summary carries no error_attempt: the row still says it is not attempt 2's
    fake.jobs[running.id].error_attempt = 0
    listing = (await admin.get("/jobs")).text
    assert "PROVIDER_TIMEOUT of an earlier attempt" in text(part(listing, f"job-{running.id}"))


async def test_the_page_says_how_long_the_job_waited_and_each_attempt_ran_and_where(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    running = second_attempt_running()
    fake.jobs[running.id] = running

    page = (await admin.get(f"/jobs/{running.id}")).text

    state = part(page, "job-state")
    assert text(part(state, "started")) == "2026-12-03 09:15:31 UTC after waiting 1.5 s"
    assert text(part(state, "finished")) == DASH
    assert text(part(state, "worker")).startswith("worker-b")
    rows = [
        [text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr><td>.*?</tr>", part(page, "timeline"), re.S)
    ]
    assert [r[0] for r in rows][:2] == [
        "2026-12-03 09:15:30.250 UTC",
        "2026-12-03 09:15:30.262 UTC",
    ]
    # to, attempt, ran, worker of each step
    assert [r[2:6] for r in rows] == [
        ["created", "0", "", ""],
        ["queued", "0", "", ""],
        ["running", "1", "4.2 s", "worker-a"],
        ["retrying", "1", "", "worker-a"],
        ["queued", "1", "", ""],
        ["running", "2", "running", "worker-b"],
    ]


async def test_a_finished_job_says_how_long_it_ran(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    job_id = v7_id()
    fake.jobs[job_id] = job(
        job_id,
        status=job_pb2.JOB_STATUS_SUCCEEDED,
        created_at=at(0),
        started_at=at(0.8),
        finished_at=at(200.8),
        total_cost_usd=0.000123456,
    )

    page = (await admin.get(f"/jobs/{job_id}")).text

    assert text(part(page, "finished")) == "2026-12-03 09:18:51 UTC after running 3 min 20 s"
    assert text(part(page, "started")).endswith("after waiting 800 ms")
    assert text(part(page, "cost")) == "$0.0001235"


async def test_a_retrying_job_says_when_its_next_attempt_is_due(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    job_id = v7_id()
    due = Timestamp()
    due.FromDatetime(datetime.now(UTC) + timedelta(seconds=40))
    fake.jobs[job_id] = job(
        job_id, status=RETRYING, attempt_count=1, max_attempts=3, next_run_at=due
    )

    page = (await admin.get(f"/jobs/{job_id}")).text

    assert "<dt>next attempt</dt>" in page
    assert text(part(page, "next-run")) == when(due)
    assert re.fullmatch(r"\(in (39\.\d|40) s\)", text(part(page, "next-run-in")))


async def test_a_retried_job_links_its_retry_and_offers_no_second_retry(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    original, retry = v7_id(), v7_id()
    fake.jobs[original] = job(original, status=FAILED, retried_as_job_ids=[retry])
    fake.jobs[retry] = job(retry, status=QUEUED, retried_from_job_id=original)

    page = (await admin.get(f"/jobs/{original}")).text
    retried = (await admin.get(f"/jobs/{retry}")).text

    assert 'id="retry"' not in page
    note = part(page, "retried-note")
    assert f'<a href="/jobs/{retry}" title="{retry}"' in note and retry[-8:] in text(note)
    assert text(part(page, "retried-as")) == f"→ {retry[-8:]}"
    assert f'<a href="/jobs/{original}" title="{original}" id="retried-from">' in retried
    assert text(part(retried, "retried-from")) == original[-8:]
    confirm = (await admin.get(f"/jobs/{original}/retry")).text
    assert f"was already retried (as {retry[-8:]})" in confirm


async def test_a_failed_job_not_yet_retried_offers_retry(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    job_id = v7_id()
    fake.jobs[job_id] = job(job_id, status=FAILED)

    page = (await admin.get(f"/jobs/{job_id}")).text

    assert f'id="retry" href="/jobs/{job_id}/retry"' in page
    assert 'id="retried-note"' not in page


LIVE_PARTS = ("job-actions", "job-state", "job-error", "job-timeline", "job-signals")


async def test_the_live_update_is_the_pages_own_parts(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    running = second_attempt_running()
    fake.jobs[running.id] = running

    page = (await admin.get(f"/jobs/{running.id}")).text
    live = environment().get_template("_job_live.html").render(job=running)

    assert f'data-live="/jobs/{running.id}/live" data-parts' in page
    for name in LIVE_PARTS:
        assert part(live, name) == part(page, name), name
    # nothing else: each top-level element of the update replaces one of the page's
    assert re.sub(r"\s", "", live) == "".join(re.sub(r"\s", "", part(live, n)) for n in LIVE_PARTS)


class Watched:
    """A WatchJob stream of ``states``; the whole job, as GetJob answers, in ``jobs``."""

    def __init__(self, states: list[job_pb2.Job], whole: dict[int, job_pb2.Job]) -> None:
        self.states = states
        self.whole = whole
        self.reads = 0
        self.at = 0

    async def watch(self, job_id: str, **_: Any) -> AsyncIterator[job_pb2.Job]:
        for i, state in enumerate(self.states):
            self.at = i
            yield state

    async def read(self, job_id: str) -> job_pb2.Job:
        self.reads += 1
        return self.whole[self.at]


async def test_each_state_change_reads_the_whole_job_and_progress_is_merged() -> None:
    job_id = v7_id()
    queued = job(job_id, status=QUEUED)
    running = second_attempt_running()
    states = [
        job(job_id, status=QUEUED),
        job(job_id, status=RUNNING, attempt_count=2, progress=0.25),
        job(job_id, status=RUNNING, attempt_count=2, progress=0.5, updated_at=at(10)),
    ]
    watched = Watched(states, {1: running})

    seen = [j async for j in followed(watched.read, queued, watched.watch)]

    assert watched.reads == 1  # the start of attempt 2; neither the first state nor progress
    assert [j.status for j in seen] == [QUEUED, RUNNING, RUNNING]
    assert len(seen[1].events) == len(seen[2].events) == 6  # the whole job, timeline and all
    assert seen[2].progress == 0.5 and seen[2].updated_at == at(10)
    assert running.progress == 0  # the job read was not changed in place


async def test_the_live_stream_sends_the_timeline_and_error_as_the_job_moves(
    fake: FakeJobService,
) -> None:
    running = second_attempt_running()
    first = job(running.id, status=QUEUED, attempt_count=1, max_attempts=3, created_at=at(0))
    fake.jobs[running.id] = first
    ended = job(running.id, status=FAILED, attempt_count=2, max_attempts=3)

    async def states(job_id: str, **_: Any) -> AsyncIterator[job_pb2.Job]:
        fake.jobs[job_id] = running
        yield job(job_id, status=RUNNING, attempt_count=2)
        fake.jobs[job_id] = ended
        yield ended

    fake.on("watch", states)
    console = Console(ConsoleSettings())
    console.jobs = lambda token: fake.client()  # type: ignore[method-assign]
    _, cookie = console.sessions.new("admin-token", SESSION_ID)
    transport = httpx.ASGITransport(app=console.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
        client.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
        body = (await client.get(f"/jobs/{running.id}/live")).text

    messages = [m for m in body.split("\n\n") if m.startswith("data:")]
    html = "\n".join(line.removeprefix("data: ") for line in messages[0].splitlines())
    assert "Error of attempt 1 of 3" in html
    assert "worker-b" in part(html, "timeline")
    assert 'id="job-attempts">2 of 3' in html
    assert body.rstrip().endswith("event: done\ndata:")


async def test_the_durable_steps_and_the_deadline_are_shown_without_values(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    job_id = v7_id()
    fake.jobs[job_id] = job(
        job_id,
        status=RETRYING,
        deadline=at(3600),
        steps=[
            job_pb2.DurableStep(ordinal=0, name="reserve", attempt=1, recorded_at=at(2)),
            job_pb2.DurableStep(
                ordinal=1, name="charge", attempt=2, recorded_at=at(9), error_code="JOB_DECLINED"
            ),
        ],
        steps_total=3,
    )

    page = (await admin.get(f"/jobs/{job_id}")).text

    assert text(part(page, "step-0")) == f"0 reserve 1 {when_ms(at(2))}"
    assert text(part(page, "step-1")) == f"1 charge 2 {when_ms(at(9))} JOB_DECLINED"
    assert "1 later steps not shown" in part(page, "steps-more")
    assert text(part(page, "deadline")) == text(when(at(3600)))


async def test_a_job_without_steps_says_none_were_recorded(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    job_id = v7_id()
    fake.jobs[job_id] = job(job_id, status=QUEUED)

    page = (await admin.get(f"/jobs/{job_id}")).text

    assert text(part(page, "no-steps")) == "None recorded."
    assert 'id="deadline"' not in page

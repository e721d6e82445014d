"""The web console in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, never a browser downloaded at run time) against ``make run``'s stack
(``python -m devstack`` as a user starts it).

Signs in, sees a job appear live, opens it, cancels it and sees it cancelled, retries a failed
job and finds the original linking its retry, redrives a dead letter, tells forty jobs created
together apart by their ids, opens a job with the "go to job" box by its short id and copies
its id, reads a job's input and output with 29 as 29, pauses a queue and sees the overview flag
it, and watches a job's timeline, attempts and worker update live without a reload (issue 31).
Then an operator's day (issue 27): signs in, finds a failed job by filter, reads its input
and error, retries it, bulk-retries a selection checked by a dry run, pauses and resumes a
queue, pauses a schedule and triggers it, sends a job a signal, opens the usage page and
sees its chart, signs out, and finds the cookie copied before refused.
Screenshots go to ``artifacts/browser/``. Run it with
``make test-browser`` (which installs the two Debian packages when they are missing); plain
``make test`` does not collect this directory.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from shared.constants import Queue
from shared.grpc_client import ChannelConfig, sync_channel
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import admin_service_pb2_grpc as agrpc
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc as jgrpc
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pb.jobs.v1 import schedule_service_pb2_grpc as sgrpc
from shared.pbconv import struct_from_dict
from tests.support.devstack_harness import Devstack, private_devstack

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
USER = "browser-user"
T = TypeVar("T")


def until(condition: Callable[[], T], timeout: float = 30, message: str = "") -> T:
    """Poll ``condition`` until it returns something truthy (selenium's wait, any callable)."""
    result: T = WebDriverWait(None, timeout, poll_frequency=0.1).until(  # type: ignore[type-var]
        lambda _: condition(), message
    )
    return result


@pytest.fixture(scope="module")
def stack() -> Iterator[Devstack]:
    with private_devstack("jobs-browser-", ARTIFACTS) as stack:
        asyncio.run(stack.ready())
        yield stack


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("needs Debian's chromium and chromium-driver: run `make test-browser`")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="jobs-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    # The driver's path given explicitly: selenium-manager downloads nothing.
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# chromedriver's message for a node read after a live update replaced it
SWAPPED_NODE = "does not belong to the document"


def shot(driver: WebDriver, name: str) -> None:
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def links(driver: WebDriver, css: str) -> list[tuple[str, str]]:
    """(text, title) of every element matching ``css``, read at once in the page: a live
    update can swap a node between a find and a read of it (CI saw it go stale)."""
    found: list[list[str]] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(function (a) { return [a.textContent.trim(), a.getAttribute('title') || '']; });",
        css,
    )
    return [(text, title) for text, title in found]


def click(driver: WebDriver, css: str) -> None:
    """Clicks the element matching ``css``, finding it again if a live update swapped it."""

    def clicked() -> bool:
        try:
            driver.find_element(By.CSS_SELECTOR, css).click()
        except StaleElementReferenceException:
            return False
        return True

    until(clicked, message=f"{css} could not be clicked")


def text_of(driver: WebDriver, css: str) -> str:
    try:
        found = driver.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""
    except StaleElementReferenceException:  # swapped by a live update meanwhile
        return ""
    except WebDriverException as exc:
        # the same race as chromedriver sometimes words it: the node it found was swapped
        # out between the find and the read
        if SWAPPED_NODE in str(exc.msg):
            return ""
        raise


def db(stack: Devstack, query: str, *args: Any) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(stack.logged(r"PostgreSQL\s+(postgres\S+)"))
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


def create(stack: Devstack, user: str = USER, **job_input: Any) -> str:
    token = stack.token("client")
    with sync_channel(ChannelConfig(target=stack.target, token=token)) as channel:
        response = jgrpc.JobServiceStub(channel).CreateJob(  # type: ignore[no-untyped-call]
            jpb.CreateJobRequest(
                user_id=user, job_type="synthetic", input=struct_from_dict(job_input)
            )
        )
    return str(response.job.id)


def resume(stack: Devstack, queue: str) -> None:
    """AdminService.ResumeQueue with the stack's admin token (the console's page is open
    elsewhere: the live view must show what follows without a reload)."""
    token = stack.token("admin")
    with sync_channel(ChannelConfig(target=stack.target, token=token)) as channel:
        agrpc.AdminServiceStub(channel).ResumeQueue(  # type: ignore[no-untyped-call]
            apb.ResumeQueueRequest(queue=queue)
        )


def timeline(driver: WebDriver) -> list[list[str]]:
    """The job page's timeline as shown: per row, its cells' text."""
    try:
        rows: list[list[str]] = driver.execute_script(
            "return Array.from(document.querySelectorAll('#timeline tr')).slice(1)"
            ".map(function (r) { return Array.from(r.cells).map(function (c) {"
            " return c.textContent.trim(); }); });"
        )
    except WebDriverException:
        return []
    return rows


def job_status(stack: Devstack, job_id: str) -> str:
    rows = db(stack, "SELECT status FROM jobs WHERE id = $1", job_id)
    return str(rows[0]["status"]) if rows else ""


def test_an_operator_signs_in_follows_cancels_retries_and_redrives(
    stack: Devstack, browser: WebDriver
) -> None:
    console = stack.logged(r"web console\s+(http://127\.0\.0\.1:\d+)/")

    # No session: every page sends the browser to sign in.
    browser.get(f"{console}/jobs?user_id={USER}")
    until(lambda: "/signin" in browser.current_url)
    browser.find_element(By.ID, "token").send_keys("not-an-admin-token-000000")
    browser.find_element(By.ID, "signin").click()
    assert "not valid" in until(lambda: text_of(browser, "#signin-error"))
    assert browser.get_cookie("jobs_console_session") is None
    shot(browser, "01-signin-refused")

    admin_token = stack.token("admin")
    browser.find_element(By.ID, "token").send_keys(admin_token)
    browser.find_element(By.ID, "signin").click()
    until(lambda: browser.current_url.endswith(f"/jobs?user_id={USER}"))
    cookie = browser.get_cookie("jobs_console_session")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert admin_token not in browser.page_source
    shot(browser, "02-jobs-empty")

    # A job created elsewhere appears in the open listing without a reload.
    long_job = create(stack, sleep_ms=120_000)
    until(lambda: browser.find_elements(By.ID, f"job-{long_job}"), message="no live row")
    shot(browser, "03-job-appeared-live")

    # Open it: the live panel follows it to running.
    browser.find_element(By.CSS_SELECTOR, f"#job-{long_job} a").click()
    until(lambda: text_of(browser, "#job-status") == "running", message="never running")
    shot(browser, "04-job-running")

    # Cancel it (with confirmation): the page shows it cancelled, and so does the database.
    browser.find_element(By.ID, "cancel").click()
    assert "Cancel job" in until(lambda: text_of(browser, "#question"))
    shot(browser, "05-cancel-confirm")
    browser.find_element(By.ID, "confirm").click()
    until(lambda: text_of(browser, "#job-status") == "cancelled", message="not cancelled")
    assert job_status(stack, long_job) == "cancelled"
    shot(browser, "06-job-cancelled")

    # A failed job: its error is shown; retry it (with confirmation) into a new job.
    failing = create(stack, fail="fatal")
    until(lambda: job_status(stack, failing) == "failed", message="the job did not fail")
    browser.get(f"{console}/jobs/{failing}")
    assert text_of(browser, "#error-code") == "JOB_REJECTED"
    browser.find_element(By.ID, "retry").click()
    # the confirmation is a new page: wait for it, not for the old one's elements
    until(lambda: text_of(browser, "#question"), message="no retry confirmation")
    browser.find_element(By.ID, "confirm").click()
    back = until(lambda: links(browser, "#retried-from"), message="no new job page")
    assert back == [(failing[-8:], failing)]
    new_id = browser.current_url.rsplit("/", 1)[1]
    rows = db(stack, "SELECT retried_from_job_id FROM jobs WHERE id = $1", new_id)
    assert [str(r["retried_from_job_id"]) for r in rows] == [failing]
    shot(browser, "07-job-retried")
    # The original now links its retry and offers no second "Retry…".
    click(browser, "#retried-from")
    until(lambda: browser.current_url.endswith(f"/jobs/{failing}"), message="original not opened")
    note = until(lambda: links(browser, "#retried-note a"))
    assert note == [(new_id[-8:], new_id)]
    assert not browser.find_elements(By.ID, "retry")
    assert "Error of attempt 1 of" in text_of(browser, "#error-title")
    shot(browser, "07b-original-links-its-retry")

    # A dead letter: an outbox event that NATS kept refusing; redrive it from the console.
    [dead] = db(
        stack,
        "UPDATE outbox_events SET status = 'dead', attempt_count = 10, last_error = 'boom'"
        " WHERE aggregate_id = $1 AND event_type = 'job.dispatch' RETURNING id",
        long_job,
    )
    browser.get(f"{console}/dead-letters")
    browser.find_element(By.CSS_SELECTOR, f"#event-{dead['id']} input[type=checkbox]").click()
    shot(browser, "08-dead-letters")
    browser.find_element(By.ID, "redrive-selected").click()
    until(lambda: text_of(browser, "#question"), message="no redrive confirmation")
    browser.find_element(By.ID, "confirm").click()
    assert "1 event(s) redriven" in until(lambda: text_of(browser, "#notice"))
    [after] = db(stack, "SELECT status FROM outbox_events WHERE id = $1", dead["id"])
    assert after["status"] != "dead"
    shot(browser, "09-redriven")

    # The overview and definitions render with the stack's own figures.
    browser.get(f"{console}/")
    until(lambda: text_of(browser, "#dead-count"))
    # Workers by their ids (AdminService.ListWorkers), not by a metrics URL.
    # read at once, in the page: the live view swaps the table every few seconds, and a
    # row found and then read apart can be gone in between (CI saw it go stale)
    worker_rows = until(
        lambda: browser.execute_script(
            "return Array.from(document.querySelectorAll('#workers tr[id^=worker-]'))"
            ".map(function (tr) { return tr.textContent; });"
        ),
        message="no worker listed",
    )
    assert "http" not in worker_rows[0]
    # read at once: the live view swaps the table every few seconds
    headings = browser.execute_script(
        "return Array.from(document.querySelectorAll('#recent th'))"
        ".map(function (th) { return th.textContent.trim(); });"
    )
    assert "not yet queued or delayed" in headings and "created" not in headings
    assert "queued" in headings and "cancelled" in headings  # every status, zeros included
    until(
        lambda: re.fullmatch(
            r"last hour: \d\d:\d\d\u2013\d\d:\d\d UTC", text_of(browser, "#recent-window")
        ),
        message="no window shown",
    )
    shot(browser, "10-overview")
    browser.get(f"{console}/definitions")
    assert browser.find_elements(By.ID, "def-synthetic")

    # Ids (issue 31): forty jobs created together (their version-7 ids share the time
    # prefix) read as forty ids in the list, each the id's tail titled with the whole id.
    burst = [create(stack, user="browser-burst") for _ in range(40)]
    browser.get(f"{console}/jobs?user_id=browser-burst&page_size=100")
    shown = until(
        lambda: browser.execute_script(
            "return Array.from(document.querySelectorAll('#job-rows a[title] code'))"
            ".map(function (c) { return [c.parentElement.title, c.textContent]; });"
        ),
        message="no rows",
    )
    assert sorted(full for full, _ in shown) == sorted(burst)
    assert {short for _, short in shown} == {full[-8:] for full in burst}
    assert len({short for _, short in shown}) == 40
    shot(browser, "11-forty-ids")

    # The header's box opens a job by the short id a list shows, or by its whole id; what
    # is neither is refused with a reason.
    browser.find_element(By.ID, "goto-id").send_keys(burst[0][-8:])
    browser.find_element(By.ID, "goto").click()
    until(lambda: browser.current_url.endswith(f"/jobs/{burst[0]}"), message="short id not opened")
    browser.find_element(By.ID, "goto-id").send_keys("not a job")
    browser.find_element(By.ID, "goto").click()
    assert "is not a job id" in until(lambda: text_of(browser, "#error-message"))
    box = browser.find_element(By.ID, "goto-id")
    box.clear()
    box.send_keys(failing)
    browser.find_element(By.ID, "goto").click()
    until(lambda: browser.current_url.endswith(f"/jobs/{failing}"), message="not opened")
    assert browser.title.startswith(f"Job {failing[-8:]} ")
    assert browser.find_element(By.ID, "job-id").get_attribute("value") == failing
    # The copy button is static script (the CSP allows no inline one): shown, and it works.
    copy = browser.find_element(By.ID, "copy-job-id")
    assert copy.is_displayed()
    copy.click()
    assert until(lambda: text_of(browser, "#copy-job-id-done"), message="copy said nothing")
    shot(browser, "12-go-to-job")

    # Input and numbers: the job's input is on its page, and a whole number reads as one.
    counted = create(stack, sleep_ms=29)
    until(lambda: job_status(stack, counted) == "succeeded", message="the job did not succeed")
    browser.get(f"{console}/jobs/{counted}")
    shown = until(lambda: text_of(browser, "#input"), message="no input shown")
    assert '"sleep_ms": 29' in shown and "29.0" not in shown
    browser.find_element(By.CSS_SELECTOR, "#output summary")
    output = browser.find_element(By.ID, "output-json").text
    assert '"attempt": 1' in output and "1.0" not in output
    assert re.fullmatch(r"jcs:sha256:[0-9a-f]{12}…", text_of(browser, "#output-hash-label"))
    assert "after waiting" in text_of(browser, "#started")
    assert "after running" in text_of(browser, "#finished")
    shot(browser, "13-input-and-numbers")

    # A paused queue is flagged on the overview (paused from the queues page).
    queue = Queue.INTERACTIVE.value
    browser.get(f"{console}/queues")
    browser.find_element(By.ID, f"pause-{queue}").click()
    until(lambda: text_of(browser, "#question"), message="no pause confirmation")
    browser.find_element(By.ID, "confirm").click()
    until(lambda: "paused" in text_of(browser, "#notice"), message="not paused")
    try:
        browser.get(f"{console}/")
        assert queue in until(lambda: text_of(browser, "#paused-queues"), message="not flagged")
        assert browser.find_elements(By.ID, f"paused-{queue}")
        shot(browser, "14-overview-paused-queue")

        # The job page stays whole while the job moves: a job held by the paused queue,
        # then run once the queue resumes, shows its new timeline row, attempt and worker
        # without a reload (the marker set on the page survives).
        held = create(stack, sleep_ms=60_000)
        browser.get(f"{console}/jobs/{held}")
        until(lambda: text_of(browser, "#hold-reason") == "queue paused", message="not held")
        assert "running" not in [r[2] for r in timeline(browser)]
        browser.execute_script("window.notReloaded = true;")
    finally:
        resume(stack, queue)
    until(lambda: text_of(browser, "#job-status") == "running", message="never running")
    started = until(
        lambda: [r for r in timeline(browser) if r[2] == "running"], message="no running row"
    )
    # attempt, ran, worker
    assert started[0][3] == "1" and started[0][4] == "running" and started[0][5]
    assert text_of(browser, "#job-attempts").startswith("1 of ")
    assert text_of(browser, "#worker").startswith(started[0][5])
    assert "after waiting" in text_of(browser, "#started")
    assert not browser.find_elements(By.ID, "hold-reason")
    assert browser.execute_script("return window.notReloaded === true;")
    shot(browser, "15-timeline-live")
    browser.find_element(By.ID, "cancel").click()
    until(lambda: text_of(browser, "#question"), message="no cancel confirmation")
    browser.find_element(By.ID, "confirm").click()
    # the page reloads when the job ends: wait for that before leaving it
    until(lambda: text_of(browser, "#job-status") == "cancelled", message="not cancelled")
    assert job_status(stack, held) == "cancelled"

    # Signing out ends the session.
    browser.find_element(By.ID, "signout").click()
    until(lambda: "/signin" in browser.current_url)
    browser.get(f"{console}/jobs")
    until(lambda: "/signin" in browser.current_url)


def make_schedule(stack: Devstack, user: str) -> str:
    """A daily schedule of ``user``'s, made through ScheduleService with the client token."""
    token = stack.token("client")
    spec = spb.ScheduleSpec(
        cron="0 6 * * *",
        job_template=spb.JobTemplate(job_type="synthetic", input=struct_from_dict({"sleep_ms": 5})),
    )
    with sync_channel(ChannelConfig(target=stack.target, token=token)) as channel:
        made = sgrpc.ScheduleServiceStub(channel).CreateSchedule(  # type: ignore[no-untyped-call]
            spb.CreateScheduleRequest(user_id=user, spec=spec, idempotency_key="browser-day")
        )
    return str(made.schedule.id)


def sign_in(browser: WebDriver, console: str, stack: Devstack) -> None:
    browser.get(f"{console}/signin")
    browser.delete_all_cookies()  # whatever an earlier test left
    browser.get(f"{console}/signin")
    until(lambda: browser.find_elements(By.ID, "token"), message="no sign-in form")
    token = stack.token("admin")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "signin").click()
    until(lambda: "/signin" not in browser.current_url, message="not signed in")


def confirm(browser: WebDriver, button_id: str, says: str) -> None:
    """Click ``button_id``, check the confirmation page's question, confirm."""
    browser.find_element(By.ID, button_id).click()
    assert says in until(lambda: text_of(browser, "#question"), message=f"no {says!r} page")
    browser.find_element(By.ID, "confirm").click()


def test_an_operators_day(stack: Devstack, browser: WebDriver) -> None:
    console = stack.logged(r"web console\s+(http://127\.0\.0\.1:\d+)/")
    failing = create(stack, user="day-ada", fail="fatal", output_bytes=29)
    bulk = [create(stack, user="day-bulk", fail="fatal") for _ in range(3)]
    for job_id in [failing, *bulk]:
        until(lambda j=job_id: job_status(stack, j) == "failed", message="a job did not fail")

    # Sign in; the session lives in job_service too.
    sign_in(browser, console, stack)
    shot(browser, "20-day-signed-in")

    # Find the failed job by filter, read its input and error, retry it.
    browser.get(f"{console}/jobs")
    Select(browser.find_element(By.NAME, "status")).select_by_visible_text("failed")
    browser.find_element(By.CSS_SELECTOR, "input[name=user_id]").send_keys("day-ada")
    browser.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    until(lambda: "status=failed" in browser.current_url, message="filter not applied")
    # read at once: the live table swaps its rows
    rows = until(
        lambda: browser.execute_script(
            "return Array.from(document.querySelectorAll('#job-rows tr[id^=job-]'))"
            ".map(function (r) { return r.id; });"
        ),
        message="no rows",
    )
    assert rows == [f"job-{failing}"]
    shot(browser, "21-day-failed-found")
    browser.find_element(By.CSS_SELECTOR, f"#job-{failing} a").click()
    until(lambda: text_of(browser, "#error-code") == "JOB_REJECTED", message="no error shown")
    assert '"output_bytes": 29' in text_of(browser, "#input")
    shot(browser, "22-day-input-and-error")
    confirm(browser, "retry", "Retry job")
    [(_, retried_from)] = until(lambda: links(browser, "#retried-from"), message="no new job")
    assert retried_from == failing

    # Bulk retry: the dry run shows how many and which, the confirmation acts on them.
    browser.get(f"{console}/jobs?user_id=day-bulk&status=failed")
    browser.find_element(By.ID, "bulk-retry").click()
    assert "3 job(s) would be retried" in until(lambda: text_of(browser, "#question"))
    ids = [a.get_attribute("title") for a in browser.find_elements(By.CSS_SELECTOR, ".bulk-id")]
    assert sorted(ids) == sorted(bulk)
    assert not db(stack, "SELECT 1 FROM jobs WHERE retried_from_job_id = ANY($1::uuid[])", bulk)
    shot(browser, "23-day-bulk-dry-run")
    browser.find_element(By.ID, "confirm").click()
    assert until(lambda: text_of(browser, "#bulk-done"), message="no bulk result") == "3"
    assert browser.find_elements(By.ID, "bulk-finished")
    retried = db(
        stack,
        "SELECT e.reason FROM job_events e JOIN jobs j ON j.id = e.job_id"
        " WHERE j.retried_from_job_id = ANY($1::uuid[]) AND e.reason LIKE 'admin %'",
        bulk,
    )
    assert (
        len(db(stack, "SELECT 1 FROM jobs WHERE retried_from_job_id = ANY($1::uuid[])", bulk)) == 3
    )
    # each new job's timeline names the operator (the admin token's principal)
    assert len(retried) == 3
    assert all(r["reason"].endswith(": console bulk retry") for r in retried)
    shot(browser, "24-day-bulk-retried")

    # Pause and resume a queue.
    queue = Queue.BACKGROUND.value
    browser.get(f"{console}/queues")
    confirm(browser, f"pause-{queue}", f"Pause queue {queue}?")
    until(lambda: "paused" in text_of(browser, "#notice"), message="not paused")
    assert browser.find_elements(By.ID, f"resume-{queue}")
    shot(browser, "25-day-queue-paused")
    confirm(browser, f"resume-{queue}", f"Resume queue {queue}?")
    until(lambda: "resumed" in text_of(browser, "#notice"), message="not resumed")
    assert browser.find_elements(By.ID, f"pause-{queue}")
    [control] = db(stack, "SELECT paused_at FROM queue_controls WHERE queue = $1", queue) or [None]
    assert control is None or control["paused_at"] is None

    # A schedule: found by its user, paused, triggered now.
    schedule_id = make_schedule(stack, "day-ada")
    browser.get(f"{console}/schedules")
    browser.find_element(By.ID, "schedules-user").send_keys("day-ada")
    browser.find_element(By.ID, "schedules-find").click()
    until(lambda: browser.find_elements(By.ID, f"schedule-{schedule_id}"), message="not listed")
    shot(browser, "26-day-schedules")
    browser.find_element(By.CSS_SELECTOR, f"#schedule-{schedule_id} a").click()
    assert len(until(lambda: browser.find_elements(By.CSS_SELECTOR, "#next-fire-times li"))) == 5
    confirm(browser, "pause", "Pause schedule")
    assert until(lambda: text_of(browser, "#notice")) == "Schedule paused."
    assert text_of(browser, "#schedule-state") == "paused"
    confirm(browser, "trigger", "Trigger schedule")
    until(lambda: "Triggered" in text_of(browser, "#notice"), message="not triggered")
    assert "triggered" in text_of(browser, "#runs")
    shot(browser, "27-day-schedule-paused-and-triggered")
    browser.find_element(By.ID, "triggered-job").click()
    link = until(lambda: browser.find_elements(By.ID, "schedule-link"), message="no schedule link")
    assert schedule_id.endswith(link[0].text)

    # A signal to a job that waits for it: its name and number on the page, never its
    # payload; the job goes on.
    waiting = create(stack, user="day-ada", wait_signals=["approve"], signal_timeout_ms=60_000)
    browser.get(f"{console}/jobs/{waiting}")
    browser.find_element(By.ID, "signal-name").send_keys("approve")
    payload = browser.find_element(By.ID, "signal-payload")
    payload.clear()
    payload.send_keys('{"ticket": "secret-77"}')
    browser.find_element(By.ID, "send-signal").click()
    assert "approve" in until(lambda: text_of(browser, "#signal-1"), message="no signal shown")
    assert "secret-77" not in text_of(browser, "#job-signals")
    browser.execute_script("document.getElementById('job-signals').scrollIntoView();")
    shot(browser, "28-day-signal")
    until(lambda: job_status(stack, waiting) == "succeeded", message="the signal was not seen")
    # the job goes on with it (synthetic echoes what it saw in its output, its own data)

    # Usage: yesterday's provider calls, drawn as a bar of the chart.
    yesterday = db(stack, "SELECT (now() - interval '1 day')::date AS d")[0]["d"]
    db(
        stack,
        "INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode,"
        " input_tokens, output_tokens, cost_usd, created_at, call_id, reused)"
        " VALUES ($1, 1, 'fake', 'fake-primary', 'platform', 1200, 300, 0.4321,"
        " now() - interval '1 day', 'browser-call-1', false)",
        waiting,
    )
    browser.get(f"{console}/usage")
    bar = until(
        lambda: browser.find_elements(
            By.CSS_SELECTOR, f"#usage-chart rect.bar[data-day='{yesterday.isoformat()}']"
        ),
        message="no bar for yesterday",
    )[0]
    assert float(bar.get_attribute("height") or 0) > 0
    assert "fake / fake-primary" in text_of(browser, "#usage-by-model")
    assert "day-ada" in text_of(browser, "#usage-by-user")
    shot(browser, "29-day-usage")

    # Sign out: a copy of the cookie taken before is refused afterwards.
    copied = browser.get_cookie("jobs_console_session")
    assert copied is not None
    browser.find_element(By.ID, "signout").click()
    until(lambda: "/signin" in browser.current_url, message="not signed out")
    browser.add_cookie(
        {"name": copied["name"], "value": copied["value"], "path": "/", "httpOnly": True}
    )
    browser.get(f"{console}/jobs")
    until(lambda: "/signin" in browser.current_url, message="the copied cookie was accepted")
    assert browser.find_elements(By.ID, "token")
    assert browser.get_cookie("jobs_console_session") is None
    shot(browser, "30-day-copied-cookie-refused")

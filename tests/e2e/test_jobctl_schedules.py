"""``jobctl schedule ...`` against the real ScheduleService: what it prints for people and
scripts, what the database holds after each command, and the exit statuses of refusals."""

from __future__ import annotations

import json
import re

import asyncpg

from tests.e2e.test_jobctl import jobctl

MISSING = "00000000-0000-0000-0000-000000000000"


async def test_create_get_update_pause_resume_trigger_and_delete_a_schedule(
    target: str, db: asyncpg.Connection
) -> None:
    created = await jobctl(
        target,
        "schedule",
        "create",
        "--cron",
        "0 9 * * 1-5",
        "--tz",
        "Europe/Berlin",
        "--type",
        "synthetic",
        "--input",
        '{"sleep_ms": 5}',
        "--overlap",
        "cancel-previous",
        "--catch-up",
        "5m",
        "--catch-up-mode",
        "latest",
        "--end",
        "2099-01-01T00:00:00Z",
        "--idempotency-key",
        "nightly-1",
        "-o",
        "json",
    )
    assert created.status == 0, created.err
    schedule = created.json()["schedule"]
    assert created.json()["created"] is True
    schedule_id = schedule["id"]
    row = await db.fetchrow("SELECT * FROM schedules WHERE id = $1", schedule_id)
    assert (row["user_id"], row["cron"], row["time_zone"], row["job_type"]) == (
        "cli-user",
        "0 9 * * 1-5",
        "Europe/Berlin",
        "synthetic",
    )
    assert json.loads(row["input"]) == {"sleep_ms": 5}
    assert (row["catch_up_window_s"], row["paused"], row["idempotency_key"]) == (
        300,
        False,
        "nightly-1",
    )
    assert row["overlap_policy"].lower().replace("_", "-").endswith("cancel-previous")
    assert row["catch_up_mode"].lower().endswith("latest")

    again = await jobctl(
        target, "schedule", "create", "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin",
        "--type", "synthetic", "--input", '{"sleep_ms": 5}', "--overlap", "cancel-previous",
        "--catch-up", "5m", "--catch-up-mode", "latest", "--end", "2099-01-01T00:00:00Z",
        "--idempotency-key", "nightly-1",
    )  # fmt: skip
    assert again.status == 0, again.err
    assert again.out.splitlines()[0] == "exists"
    assert await db.fetchval("SELECT count(*) FROM schedules") == 1

    shown = await jobctl(target, "schedule", "get", schedule_id)
    assert shown.status == 0, shown.err
    fields = dict(line.split(maxsplit=1) for line in shown.out.splitlines() if "  " in line)
    assert fields["cron"].strip() == "0 9 * * 1-5"
    # fire times in UTC, saying so, and on the schedule's own clock (09:00 Berlin)
    [first_fire] = shown.out.split("next fire times\n")[1].splitlines()[:1]
    assert re.fullmatch(r"  \S+Z \(\d{4}-\d\d-\d\d 09:00 Europe/Berlin\)", first_fire), first_fire
    assert fields["state"].strip() == "active"
    assert fields["overlap"].strip() == "cancel-previous"
    assert "next fire times" in shown.out

    listed = await jobctl(target, "schedule", "list")
    header, *rows = listed.out.splitlines()
    assert header.split() == ["ID", "CRON", "TZ", "TYPE", "STATE", "NEXT"]
    assert [r.split()[0] for r in rows] == [schedule_id]
    as_lines = await jobctl(target, "schedule", "list", "-o", "jsonl")
    assert [json.loads(line)["id"] for line in as_lines.out.splitlines()] == [schedule_id]

    # update changes only what is given: the cron; the input and time zone stay
    updated = await jobctl(target, "schedule", "update", schedule_id, "--cron", "*/5 * * * *")
    assert updated.status == 0, updated.err
    row = await db.fetchrow(
        "SELECT cron, time_zone, input FROM schedules WHERE id = $1", schedule_id
    )
    assert (row["cron"], row["time_zone"]) == ("*/5 * * * *", "Europe/Berlin")
    assert json.loads(row["input"]) == {"sleep_ms": 5}

    paused = await jobctl(target, "schedule", "pause", schedule_id)
    assert paused.out.split() == [schedule_id, "paused"]
    assert await db.fetchval("SELECT paused FROM schedules WHERE id = $1", schedule_id)
    resumed = await jobctl(target, "schedule", "resume", schedule_id, "-o", "json")
    assert resumed.json().get("paused", False) is False
    assert "next_fire_at" in resumed.json()
    assert not await db.fetchval("SELECT paused FROM schedules WHERE id = $1", schedule_id)

    triggered = await jobctl(target, "schedule", "trigger", schedule_id)
    assert triggered.status == 0, triggered.err
    [word, job_id] = triggered.out.split()
    assert word == "triggered"
    job = await db.fetchrow("SELECT user_id, schedule_id::text FROM jobs WHERE id = $1", job_id)
    assert dict(job) == {"user_id": "cli-user", "schedule_id": schedule_id}
    runs = await jobctl(target, "schedule", "get", schedule_id)
    assert f"triggered  {job_id}" in runs.out

    unconfirmed = await jobctl(target, "schedule", "delete", schedule_id)
    assert unconfirmed.status == 2  # no terminal to ask on: --yes is needed
    assert "--yes" in unconfirmed.err
    deleted = await jobctl(target, "schedule", "delete", schedule_id, "--yes")
    assert (deleted.status, deleted.out.strip()) == (0, f"deleted {schedule_id}")
    assert await db.fetchval("SELECT count(*) FROM schedules") == 0
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE id = $1", job_id) == 1  # stays
    none_left = await jobctl(target, "schedule", "list")
    assert (none_left.status, none_left.out.strip()) == (0, "no schedules")
    assert "user 'cli-user' has no schedules; schedules are listed per user" in none_left.err


async def test_schedule_refusals_say_why_and_write_nothing(
    target: str, db: asyncpg.Connection
) -> None:
    missing = await jobctl(target, "schedule", "get", MISSING)
    assert (missing.status, missing.out) == (3, "")
    assert "SCHEDULE_NOT_FOUND" in missing.err
    assert "(for user 'cli-user'; another user's schedule: --user <its owner>)" in missing.err
    for command in ("pause", "resume", "trigger"):
        refused = await jobctl(target, "schedule", command, MISSING)
        assert refused.status == 3, (command, refused.err)
    assert (await jobctl(target, "schedule", "delete", MISSING, "--yes")).status == 3
    assert (await jobctl(target, "schedule", "update", MISSING, "--cron", "* * * * *")).status == 3

    bad_cron = await jobctl(
        target, "schedule", "create", "--cron", "every day", "--type", "synthetic"
    )
    assert bad_cron.status == 6, bad_cron.err
    assert "spec.cron" in bad_cron.err
    bad_input = await jobctl(
        target, "schedule", "create", "--cron", "* * * * *", "--type", "synthetic",
        "--input", '{"sleep_ms": "soon"}',
    )  # fmt: skip
    assert bad_input.status == 6
    assert "sleep_ms" in bad_input.err
    bad_zone = await jobctl(
        target, "schedule", "create", "--cron", "* * * * *", "--type", "synthetic",
        "--tz", "Mars/Olympus",
    )  # fmt: skip
    assert bad_zone.status == 6
    assert "time_zone" in bad_zone.err

    # refused before anything is sent
    not_json = await jobctl(
        target, "schedule", "create", "--cron", "* * * * *", "--type", "synthetic",
        "--input", "{oops",
    )  # fmt: skip
    assert (not_json.status, "not JSON" in not_json.err) == (2, True)
    no_cron = await jobctl(target, "schedule", "create", "--type", "synthetic")
    assert no_cron.status == 2
    assert "--cron" in no_cron.err
    bad_window = await jobctl(
        target, "schedule", "create", "--cron", "* * * * *", "--type", "synthetic",
        "--catch-up", "soon",
    )  # fmt: skip
    assert bad_window.status == 2
    assert "argument --catch-up" in bad_window.err
    bad_overlap = await jobctl(
        target, "schedule", "create", "--cron", "* * * * *", "--type", "synthetic",
        "--overlap", "sometimes",
    )  # fmt: skip
    assert bad_overlap.status == 2
    assert await db.fetchval("SELECT count(*) FROM schedules") == 0

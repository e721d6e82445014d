"""Projections of the reference AI job types, committed by the job service in one
transaction with the status change, and the failure isolation table of seed 001 §3.3 —
a test per row — with the worker played by hand against real PostgreSQL and NATS."""

from __future__ import annotations

from typing import Any

import asyncpg
import grpc
import pytest

from job_service.adapters.postgres.pool import init_connection
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.ai import FEYNMAN_INPUT, worker_result
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually

S = job_pb2


@pytest.fixture(autouse=True)
async def jsonb_as_values(db: asyncpg.Connection) -> None:
    await init_connection(db)


async def feynman_succeeded(client: Client) -> tuple[str, str]:
    """A feynman_evaluation run to success by hand: (parent id, child id)."""
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    locked = (await client.lock(parent.id)).job
    answer = await client.executor.SubmitResult(await worker_result(locked))
    assert answer.status == S.JOB_STATUS_SUCCEEDED
    [child_id] = (await client.get(parent.id)).child_job_ids
    return parent.id, child_id


async def artifacts_of(db: asyncpg.Connection, job_id: str) -> list[dict[str, Any]]:
    rows = await db.fetch(
        "SELECT id, artifact_type, artifact_id, ordinal, payload, created_at"
        " FROM job_artifacts WHERE job_id = $1 ORDER BY id",
        job_id,
    )
    return [dict(r) for r in rows]


async def status_of(db: asyncpg.Connection, job_id: str) -> str:
    return await db.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)


async def fail_attempt(client: Client, job_id: str, code: str) -> epb.SubmitFailureResponse:
    locked = (await client.lock(job_id)).job
    return await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job_id, lease_token=locked.lease_token, error_code=code, error_message="x"
        )
    )


# --- the projection -------------------------------------------------------------------


async def test_a_feynman_projection_commits_result_focus_items_and_one_child(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await feynman_succeeded(client)

    parent = await client.get(parent_id)
    assert parent.status == S.JOB_STATUS_SUCCEEDED
    output = dict(parent.output)
    weaknesses = list(output["weaknesses"])
    assert weaknesses, "the fake evaluation of this explanation finds weaknesses"
    artifacts = [(a.artifact_type, a.artifact_id, a.ordinal) for a in parent.artifacts]
    assert ("feynman_result", f"fe_{parent_id}", 0) in artifacts
    assert sorted(a for a in artifacts if a[0] == "focus_item") == [
        ("focus_item", f"fi_{parent_id}_{i}", i) for i in range(len(weaknesses))
    ]
    assert (parent.prompt_key, parent.prompt_version, parent.model_tier) == (
        "feynman-evaluation",
        "1.0.0",
        "primary",
    )

    child = await client.get(child_id)
    assert child.job_type == "review_card_generation"
    assert child.status == S.JOB_STATUS_QUEUED
    assert child.parent_job_id == parent_id
    assert child.queue == "ai-background"
    assert child.idempotency_key == f"review-card:feynman:{parent_id}"
    assert (child.prompt_key, child.prompt_version, child.model_tier) == (
        "review-card-generation",
        "1.0.0",
        "cheap",
    )
    row = await db.fetchrow(
        "SELECT j.trigger_type, s.payload, s.content_hash, s.expires_at > now() AS expires"
        " FROM jobs j JOIN job_snapshots s ON s.job_id = j.id WHERE j.id = $1",
        child_id,
    )
    assert row["trigger_type"] == "child_job" and row["expires"]
    snapshot = row["payload"]
    assert snapshot["title"] == output["summary"][:80]
    assert snapshot["cardCount"] == min(3, max(1, len(weaknesses)))
    assert snapshot["sourceResultId"] == f"fe_{parent_id}"
    assert (snapshot["userId"], snapshot["parentJobId"]) == ("user-1", parent_id)
    assert (snapshot["knowledgeItemId"], snapshot["knowledgeBaseId"]) == ("ki-42", "kb-7")
    assert (snapshot["promptKey"], snapshot["promptVersion"], snapshot["modelTier"]) == (
        "review-card-generation",
        "1.0.0",
        "cheap",
    )
    dispatch = await db.fetch(
        "SELECT subject FROM outbox_events WHERE event_type = 'job.dispatch' AND aggregate_id = $1",
        child_id,
    )
    assert [r["subject"] for r in dispatch] == ["jobs.dispatch.ai-background"]
    # the worker is told whose job it is and which prompt version it was created with
    lease = (await client.lock(child_id)).job
    assert (lease.user_id, lease.prompt_key, lease.prompt_version) == (
        "user-1",
        "review-card-generation",
        "1.0.0",
    )


async def test_get_job_totals_usage_of_every_provider_call_including_failed_ones(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    locked = (await client.lock(parent.id)).job
    failed_call = epb.ProviderUsage(
        provider="openai",
        model="deepseek-chat",
        credential_mode="platform",
        latency_ms=30_000,
        error_code="PROVIDER_TIMEOUT",
    )
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=parent.id,
            lease_token=locked.lease_token,
            error_code="PROVIDER_TIMEOUT",
            usage=[failed_call],
        )
    )
    await db.execute("UPDATE jobs SET next_run_at = now()")
    locked = (await client.lock(parent.id)).job
    await client.executor.SubmitResult(await worker_result(locked))

    view = await client.get(parent.id)
    assert (view.total_input_tokens, view.total_output_tokens) == (120, 40)
    assert view.total_cost_usd == pytest.approx(0.0012)
    rows = await db.fetch(
        "SELECT attempt, provider, model, credential_mode, input_tokens, latency_ms, error_code"
        " FROM usage_logs WHERE job_id = $1 ORDER BY id",
        parent.id,
    )
    assert [tuple(r) for r in rows] == [
        (1, "openai", "deepseek-chat", "platform", 0, 30_000, "PROVIDER_TIMEOUT"),
        (2, "fake", "fake-primary", "platform", 120, 15, None),
    ]


async def test_a_retry_after_delays_the_retry_at_least_that_long(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    locked = (await client.lock(parent.id)).job

    answer = await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=parent.id,
            lease_token=locked.lease_token,
            error_code="PROVIDER_RATE_LIMITED",
            retry_after_ms=20_000,
        )
    )

    assert answer.status == S.JOB_STATUS_RETRYING
    delay = await db.fetchval("SELECT extract(epoch FROM next_run_at - now()) FROM jobs")
    assert 18 < delay <= 20  # the definition's own backoff would be about a second


async def test_a_snapshot_holds_only_allow_listed_fields_and_hashes_stably(
    client: Client, db: asyncpg.Connection
) -> None:
    noisy = {
        **FEYNMAN_INPUT,
        "api_key": "sk-should-never-be-stored-0123456789",
        "session_id": "s-1",
        "answer_id": "a-1",
        "jwt": "eyJhbGciOi",
    }
    first = (await client.create(job_type="feynman_evaluation", key="a", **noisy)).job
    second = (await client.create(job_type="feynman_evaluation", key="b", **FEYNMAN_INPUT)).job

    rows = await db.fetch(
        "SELECT payload, content_hash FROM job_snapshots WHERE job_id = ANY($1::uuid[])",
        [first.id, second.id],
    )
    assert [r["payload"] for r in rows] == [FEYNMAN_INPUT, FEYNMAN_INPUT]
    assert rows[0]["content_hash"] == rows[1]["content_hash"]
    dump = await db.fetchval("SELECT string_agg(payload::text, '') FROM job_snapshots")
    assert "sk-should-never" not in dump and "s-1" not in dump


async def test_expired_snapshots_of_finished_jobs_are_cleaned(
    client: Client, db: asyncpg.Connection, database_url: str, nats_url: str
) -> None:
    _, child_id = await feynman_succeeded(client)
    await db.execute("UPDATE job_snapshots SET expires_at = now() - interval '1 second'")

    async with running_job_service(database_url, nats_url, snapshot_clean_interval_s=0.1):

        async def cleaned() -> bool:
            left = await db.fetch("SELECT job_id::text AS id FROM job_snapshots")
            return [r["id"] for r in left] == [child_id]

        await eventually(cleaned, timeout=10, message="the finished job's snapshot stayed")
    # the queued child keeps its expired snapshot: it still needs its input
    assert (await client.lock(child_id)).outcome == epb.LOCK_OUTCOME_LOCKED


# --- seed 001 §3.3, row by row --------------------------------------------------------


async def test_row1_a_refused_parent_projection_leaves_no_child_and_fails_the_parent(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    answers = []
    for _ in range(2):  # INTERNAL_* is retried once
        await db.execute("UPDATE jobs SET next_run_at = now() WHERE id = $1", parent.id)
        request = await worker_result((await client.lock(parent.id)).job)
        request.child_jobs[0].input.update({"cardCount": 99})  # the child type refuses it
        answers.append((await client.executor.SubmitResult(request)).status)

    assert answers == [S.JOB_STATUS_RETRYING, S.JOB_STATUS_FAILED]
    view = await client.get(parent.id)
    assert view.error_code == "INTERNAL_PROJECTION_REFUSED"
    assert not view.child_job_ids and not view.artifacts
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1
    assert await db.fetchval("SELECT count(*) FROM job_snapshots") == 1


async def test_row1_a_child_type_the_parent_may_not_create_is_refused(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    request = await worker_result((await client.lock(parent.id)).job)
    request.child_jobs.append(
        epb.ChildJob(job_type="synthetic", input=struct_from_dict({}), idempotency_key="k")
    )

    answer = await client.executor.SubmitResult(request)

    assert answer.status == S.JOB_STATUS_RETRYING
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 0


async def test_row2_a_child_insert_failing_in_the_transaction_rolls_the_parent_back(
    client: Client, db: asyncpg.Connection
) -> None:
    await db.execute(
        """
        CREATE FUNCTION refuse_children() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'simulated child insert failure'; END $$;
        CREATE TRIGGER refuse_children BEFORE INSERT ON jobs FOR EACH ROW
            WHEN (NEW.trigger_type = 'child_job') EXECUTE FUNCTION refuse_children();
        """
    )
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    request = await worker_result((await client.lock(parent.id)).job)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.executor.SubmitResult(request)

    assert raised.value.code() == grpc.StatusCode.INTERNAL
    assert await status_of(db, parent.id) == "running"  # nothing of the result committed
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1
    assert await db.fetchval("SELECT count(*) FROM job_artifacts") == 0
    assert await db.fetchval("SELECT count(*) FROM usage_logs") == 0
    assert (
        await db.fetchval("SELECT count(*) FROM outbox_events WHERE event_type <> 'job.dispatch'")
        == 0
    )


async def test_row3_a_failing_child_executor_leaves_the_parent_succeeded(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await feynman_succeeded(client)
    before = await artifacts_of(db, parent_id)

    answer = await fail_attempt(client, child_id, "CONTENT_SAFETY_BLOCKED")

    assert answer.status == S.JOB_STATUS_FAILED
    assert await status_of(db, parent_id) == "succeeded"
    assert await artifacts_of(db, parent_id) == before
    assert await artifacts_of(db, child_id) == []


async def test_row4_a_refused_child_projection_leaves_the_parent_succeeded_and_no_cards(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await feynman_succeeded(client)
    before = await artifacts_of(db, parent_id)
    answers = []
    for _ in range(2):
        await db.execute("UPDATE jobs SET next_run_at = now() WHERE id = $1", child_id)
        request = await worker_result((await client.lock(child_id)).job)
        request.child_jobs.append(  # review cards may create no children
            epb.ChildJob(job_type="synthetic", input=struct_from_dict({}), idempotency_key="k")
        )
        answers.append((await client.executor.SubmitResult(request)).status)

    assert answers == [S.JOB_STATUS_RETRYING, S.JOB_STATUS_FAILED]
    assert await status_of(db, parent_id) == "succeeded"
    assert await artifacts_of(db, parent_id) == before
    assert await artifacts_of(db, child_id) == []


async def test_row5_a_retried_child_succeeds_without_touching_the_parent(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await feynman_succeeded(client)
    before = await artifacts_of(db, parent_id)
    parent_row = dict(await db.fetchrow("SELECT * FROM jobs WHERE id = $1", parent_id))

    assert (await fail_attempt(client, child_id, "PROVIDER_UNAVAILABLE")).status == (
        S.JOB_STATUS_RETRYING
    )
    await db.execute("UPDATE jobs SET next_run_at = now() WHERE id = $1", child_id)
    locked = (await client.lock(child_id)).job
    answer = await client.executor.SubmitResult(await worker_result(locked))

    assert answer.status == S.JOB_STATUS_SUCCEEDED
    child = await client.get(child_id)
    cards = [a for a in child.artifacts if a.artifact_type == "review_card"]
    snapshot = await db.fetchval("SELECT payload FROM job_snapshots WHERE job_id = $1", child_id)
    assert 1 <= len(cards) == snapshot["cardCount"] <= 3
    assert [(c.artifact_id, c.ordinal) for c in cards] == [
        (f"rc_{child_id}_{i}", i) for i in range(len(cards))
    ]
    payload = dict(cards[0].payload)
    assert {k: payload[k] for k in ("status", "intervalDays", "easeFactor", "scheduleState")} == {
        "status": "active",
        "intervalDays": 1,
        "easeFactor": 2.5,
        "scheduleState": "new",
    }
    assert (payload["repetitionCount"], payload["lapseCount"]) == (0, 0)
    assert payload["nextReviewAt"]
    assert await artifacts_of(db, parent_id) == before
    assert dict(await db.fetchrow("SELECT * FROM jobs WHERE id = $1", parent_id)) == parent_row


async def test_row6_a_permanently_failed_child_is_a_legal_final_state(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await feynman_succeeded(client)

    answer = await fail_attempt(client, child_id, "CREDENTIAL_INVALID")

    assert answer.status == S.JOB_STATUS_FAILED
    parent = await client.get(parent_id)
    child = await client.get(child_id)
    assert (parent.status, child.status) == (S.JOB_STATUS_SUCCEEDED, S.JOB_STATUS_FAILED)
    assert child.error_code == "CREDENTIAL_INVALID"
    assert list(parent.child_job_ids) == [child_id]


async def test_rerunning_a_parent_projection_returns_the_existing_child(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    request = await worker_result((await client.lock(parent.id)).job)

    first = await client.executor.SubmitResult(request)
    again = await client.executor.SubmitResult(request)  # a worker's retried submit

    assert first.status == again.status == S.JOB_STATUS_SUCCEEDED
    [child_id] = (await client.get(parent.id)).child_job_ids
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE parent_job_id = $1", parent.id) == 1
    assert await db.fetchval("SELECT count(*) FROM job_snapshots WHERE job_id = $1", child_id) == 1
    assert (
        await db.fetchval(
            "SELECT count(*) FROM outbox_events WHERE event_type = 'job.dispatch'"
            " AND aggregate_id = $1",
            child_id,
        )
        == 1
    )
    assert await db.fetchval("SELECT count(*) FROM usage_logs") == 1


async def test_a_projection_finding_its_child_already_created_adds_no_second_one(
    client: Client, db: asyncpg.Connection
) -> None:
    parent = (await client.create(job_type="feynman_evaluation", **FEYNMAN_INPUT)).job
    request = await worker_result((await client.lock(parent.id)).job)
    # an earlier projection of this parent already created the child
    existing = await db.fetchval(
        """
        INSERT INTO jobs (user_id, job_type, trigger_type, queue, idempotency_key, request_hash,
                          parent_job_id, status, max_attempts, timeout_ms,
                          input_schema_version, output_schema_version, definition_version)
        VALUES ('user-1', 'review_card_generation', 'child_job', 'ai-background', $1, 'h',
                $2, 'queued', 3, 1000, '1', '1', '1')
        RETURNING id::text
        """,
        f"review-card:feynman:{parent.id}",
        parent.id,
    )

    answer = await client.executor.SubmitResult(request)

    assert answer.status == S.JOB_STATUS_SUCCEEDED
    assert list((await client.get(parent.id)).child_job_ids) == [existing]
    assert await db.fetchval("SELECT count(*) FROM job_snapshots WHERE job_id = $1", existing) == 0
    assert (
        await db.fetchval("SELECT count(*) FROM outbox_events WHERE aggregate_id = $1", existing)
        == 0
    )


async def test_cancelling_a_parent_cancels_its_unfinished_children(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await feynman_succeeded(client)

    view = (await client.jobs.CancelJob(_cancel(parent_id))).job

    assert view.status == S.JOB_STATUS_SUCCEEDED  # a finished parent stays as it was
    child = await client.get(child_id)
    assert child.status == S.JOB_STATUS_CANCELLED
    assert child.error_code == "CANCELLED"
    assert (await client.lock(child_id)).outcome == epb.LOCK_OUTCOME_UNAVAILABLE


async def test_cancelling_a_parent_stops_a_running_child(
    client: Client, db: asyncpg.Connection
) -> None:
    parent_id, child_id = await feynman_succeeded(client)
    lease = (await client.lock(child_id)).job

    await client.jobs.CancelJob(_cancel(parent_id))

    ack = await client.executor.Heartbeat(
        epb.HeartbeatRequest(job_id=child_id, lease_token=lease.lease_token)
    )
    assert ack.cancel_requested
    assert await status_of(db, child_id) == "cancel_requested"


async def test_cancelling_a_parent_without_unfinished_children_is_refused_as_before(
    client: Client,
) -> None:
    parent_id, child_id = await feynman_succeeded(client)
    await fail_attempt(client, child_id, "CREDENTIAL_INVALID")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.jobs.CancelJob(_cancel(parent_id))

    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def _cancel(job_id: str) -> jpb.CancelJobRequest:
    return jpb.CancelJobRequest(job_id=job_id, user_id="user-1")


async def test_bad_feynman_input_is_refused_by_field_and_writes_nothing(
    client: Client, db: asyncpg.Connection
) -> None:
    bad = {k: v for k, v in FEYNMAN_INPUT.items() if k != "explanation"} | {"title": ""}

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.create(job_type="feynman_evaluation", **bad)

    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    error = error_from_rpc(raised.value)
    assert error is not None
    assert sorted(v.field for v in error.violations) == ["input.explanation", "input.title"]
    assert await db.fetchval("SELECT count(*) FROM jobs") == 0

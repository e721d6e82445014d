"""`approval_agent`: an agent that drafts a message with the model, waits for a person's
approval, and only then sends it — the example of durable steps and waits (issue 45,
docs/job-types.md "Example: an agent that waits for approval").

    draft     one checkpointed model call (cheap tier, prompt ``approval-draft`` 1.0.0)
    wait      ``ctx.wait_for_signal("approve", timeout)``: the attempt ends and the job
              holds no worker slot until a signal named ``approve`` (or the timeout)
              wakes it; it then runs again from the top, its draft returned as recorded
    send      approved: ``ctx.step("send", ...)`` posts the draft to the message service
              with ``ctx.step_key`` as its idempotency key (a worker killed between the
              post and its record posts again with the same key, which the service
              applies once)

An ``approve`` signal approves unless its payload says ``"approved": false``. Output
``{draft{subject, body}, outcome, approval, receipt}``: ``outcome`` is ``sent``,
``rejected`` or ``timed_out``; ``approval`` the signal's payload (None: timed out);
``receipt`` the service's answer (None unless sent).

The message service is ``jobtypes.message_service`` (a fake that counts calls per key),
reached at ``JOBS_MESSAGE_SERVICE_URL``, read when the step runs (default
http://127.0.0.1:8090, where ``python -m jobtypes.message_service`` listens). An
unreachable or failing service is not a recorded outcome: the attempt fails and the retry
posts again with the same key (the step itself tries a few times first: the key makes
that safe). A refusal (HTTP 4xx) is: the job fails JOB_REJECTED.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from jobtypes import message_service
from jobtypes.aijob import check_content, parsed_object, run_step, template_for, validate_model
from jobtypes.safety import DEFAULT_CHECKER
from shared.ai.prompts import PromptTemplate, register_prompt
from shared.ai.provider import ModelTier
from shared.canonical import canonical_json
from shared.constants import Queue
from shared.durable_steps import MAX_SUSPENSION_S
from shared.errors import ErrorCode, ExecutionError
from shared.registry import AbortStrategy, ExecutionContext, JobDefinition, JobResult

JOB_TYPE = "approval_agent"
MODEL_TIER = ModelTier.CHEAP
SIGNAL = "approve"
URL_SETTING = "JOBS_MESSAGE_SERVICE_URL"
DEFAULT_URL = f"http://127.0.0.1:{message_service.DEFAULT_PORT}"
# Per try; the tries and the pauses between them (0.5 + 1 + 2 + 4 s) fit the attempt's
# timeout_s (60 s) with room for the rest of the run.
SEND_TIMEOUT_S = 5.0
SEND_TRIES = 5
SEND_BACKOFF_S = 0.5


class ApprovalAgentInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str = Field(min_length=1, max_length=255, description="who the message is for")
    request: str = Field(min_length=1, max_length=5000, description="what it should say")
    approval_timeout_s: float = Field(
        default=86_400.0,
        gt=0,
        le=MAX_SUSPENSION_S,
        description="how long to wait for the approve signal before giving up",
    )


class Draft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1, max_length=5000)


class Receipt(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message_id: str
    idempotency_key: str


class ApprovalAgentOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    draft: Draft
    outcome: Literal["sent", "rejected", "timed_out"]
    approval: dict[str, Any] | None
    receipt: Receipt | None


def _fake(variables: dict[str, Any]) -> dict[str, Any]:
    """A plausible draft, deterministic in its input."""
    request = str(variables.get("request", "")).strip()
    first_line = request.splitlines()[0] if request else "a note"
    return {
        "subject": first_line[:80],
        "body": f"Hello {variables.get('to', '')},\n\n{request}\n\nBest regards",
    }


PROMPT = register_prompt(
    PromptTemplate(
        key="approval-draft",
        version="1.0.0",
        system=(
            "You draft a short, friendly message for a person to review before it is "
            "sent. Answer with one JSON object: subject (at most 80 characters) and body "
            "(plain text, at most 200 words). Write only what the request asks for."
        ),
        user="To: {to}\n\nWhat the message should say:\n{request}",
        fake=_fake,
    )
)


def message_service_url() -> str:
    return os.environ.get(URL_SETTING, "").strip() or DEFAULT_URL


async def post_message(url: str, key: str, to: str, draft: dict[str, Any]) -> dict[str, Any]:
    """The service's receipt for the message under ``key``. The key makes a repeat safe,
    so an unreachable or failing service is tried again here, ``SEND_TRIES`` times in all;
    then the attempt fails unrecorded (the next one posts again, same key). A refusal
    (4xx) is a job error: recorded, never posted again."""
    message = {"to": to, "subject": draft["subject"], "body": draft["body"]}
    delay = SEND_BACKOFF_S
    async with httpx.AsyncClient(timeout=SEND_TIMEOUT_S) as http:
        for tries in range(1, SEND_TRIES + 1):
            try:
                answer = await http.post(
                    f"{url}{message_service.PATH}", json=message, headers={"Idempotency-Key": key}
                )
            except httpx.TransportError as error:
                failure = type(error).__name__
            else:
                if answer.is_client_error:
                    raise ExecutionError(
                        ErrorCode.JOB_REJECTED,
                        f"the message service refused the message ({answer.status_code})",
                    )
                if answer.is_success:
                    receipt: dict[str, Any] = Receipt.model_validate(answer.json()).model_dump()
                    return receipt
                failure = f"HTTP {answer.status_code}"
            if tries < SEND_TRIES:
                await asyncio.sleep(delay)
                delay *= 2
    raise ConnectionError(
        f"the message service at {url} did not answer ({failure}, {SEND_TRIES} tries); "
        "is `python -m jobtypes.message_service` running?"
    )


async def execute(job_input: ApprovalAgentInput, ctx: ExecutionContext) -> JobResult:
    rendered = template_for(PROMPT, ctx).render({"to": job_input.to, "request": job_input.request})
    for message in rendered.messages:
        check_content(DEFAULT_CHECKER, message.content, "prompt")
    draft = await run_step(
        ctx, "draft", MODEL_TIER, rendered, lambda r: validate_model(Draft, parsed_object(r))
    )
    check_content(DEFAULT_CHECKER, canonical_json(draft.model_dump(mode="json")), "output")
    ctx.report_progress(0.5)

    approval = await ctx.wait_for_signal(SIGNAL, job_input.approval_timeout_s)
    if approval is None:
        return JobResult(
            ApprovalAgentOutput(draft=draft, outcome="timed_out", approval=None, receipt=None)
        )
    if approval.get("approved") is False:
        return JobResult(
            ApprovalAgentOutput(draft=draft, outcome="rejected", approval=approval, receipt=None)
        )

    async def send() -> dict[str, Any]:
        return await post_message(
            message_service_url(), ctx.step_key, job_input.to, draft.model_dump()
        )

    receipt = await ctx.step("send", send)
    ctx.report_progress(1.0)
    return JobResult(
        ApprovalAgentOutput(
            draft=draft, outcome="sent", approval=approval, receipt=Receipt.model_validate(receipt)
        )
    )


DEFINITION = JobDefinition(
    job_type=JOB_TYPE,
    label="Approval agent",
    domain="agents",
    version="1.0.0",
    queue=Queue.BACKGROUND,
    input_model=ApprovalAgentInput,
    output_model=ApprovalAgentOutput,
    execute=execute,
    prompt_key=PROMPT.key,
    prompt_version=PROMPT.version,
    model_tier=MODEL_TIER,
    content_safety_check=True,
    timeout_s=60.0,
    # a worker lost mid-send is retried (LEASE); an unreachable service once (INTERNAL)
    max_attempts=3,
    backoff_base_s=1.0,
    backoff_max_s=30.0,
    abort_strategy=AbortStrategy.RETRY,
)

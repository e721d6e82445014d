"""Grants: every way a job leaves the service for a worker, in one door.

The words (docs/architecture.md, "Grants: one door"): a **claim** chooses waiting jobs and
leases them in one transaction (``usecases/claims.py``, the same policy, limits and fencing
whichever way the jobs then travel); a **grant** is one such lease handed to a worker. A
grant leaves by one of three ways, each a method here:

- ``for_tokens``: LockJob/LockJobs. Each request of LockJobs is a **work token**, a
  dispatch message the worker fetched from JetStream; the claim chooses the jobs and says
  when to hand the unused tokens back. LockJob names its job (a worker that predates
  tokens).
- ``push``: **pushed grants** (ADR 0009). The outbox dispatcher offers each batch of
  dispatch messages here before publishing it: per queue, up to one grant per message for
  the waiting worker with the most room (``usecases/waiting_workers.py``), sent down its
  session. The messages a grant used are marked published without being sent; the rest go
  to NATS as before.
- ``with_results``: **lock on submit** (ADR 0009). A worker that asks with its submitted
  results is granted the backlog of its queues in the answer.

Nothing is lost on a crash: a pushed grant marks the messages it used published in its
own statement, so grant and mark commit together; the messages no grant used stay claimed
until the dispatcher publishes them, or the stale-claim takeover does. A grant
whose session ended before it could be sent is handed back at once (WORKER_SHUTDOWN: the
attempt is refunded); one lost on the way to a worker is an ordinary lease, reaped when it
expires. Every grant carries the steps its job's earlier attempts recorded.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from job_service import fault_hooks, metrics
from job_service.domain.checks import MAX_BATCH, is_uuid, require_batch, require_name
from job_service.domain.envelopes import INPUT
from job_service.domain.grants import LockGrant, LockRefusal
from job_service.domain.outbox import DispatchMark, OutboxMessage
from job_service.ports.steps import StepStore
from job_service.usecases.claims import Claims
from job_service.usecases.leases import Leases
from job_service.usecases.queues import require_queue
from job_service.usecases.sealing import Sealer
from job_service.usecases.waiting_workers import WaitingWorker, WaitingWorkers
from shared import tracing
from shared.constants import DISPATCH_SUBJECT_PREFIX
from shared.errors import FieldViolation, InvalidInput

log = logging.getLogger(__name__)

# A worker names at most this many definitions it runs, each as job_type@version.
MAX_RUNNABLE = 256
DEFINITION_ID = re.compile(r"[a-z][a-z0-9_]{1,63}@[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
DISPATCH_PREFIX = DISPATCH_SUBJECT_PREFIX + "."
NOT_DELIVERED = "the pushed grant's session ended before it could be sent"
# Lock on submit takes only jobs due this long at least: the backlog. A job due just now is
# the push's to deliver (or its work token's); results that took it first would leave its
# dispatch message to be published, fetched and locked for nothing, and under a steady
# load keep each other going (ADR 0009: measured, steady p50 ~3x worse without it).
BACKLOG_AFTER_S = 0.25


class Grants:
    """The one door of grants: for work tokens, pushed down sessions, with results."""

    def __init__(
        self,
        claims: Claims,
        leases: Leases,
        steps: StepStore,
        waiting: WaitingWorkers | None = None,
        *,
        sealer: Sealer | None = None,
    ) -> None:
        """``waiting``: the sessions pushed grants go to; None: grants are never pushed.
        ``sealer`` opens each grant's input and recorded steps (None: as stored)."""
        self._sealer = sealer or Sealer(None, None)
        self._claims = claims
        self._leases = leases
        self._steps = steps
        self.waiting = waiting
        self._handing_back: set[asyncio.Task[None]] = set()

    async def for_tokens(
        self,
        job_ids: Sequence[str],
        worker_id: str,
        queue: str = "",
        runnable: Sequence[str] = (),
    ) -> list[LockGrant | LockRefusal]:
        """One answer per request, in order. With ``queue``, each request is a work token
        of that queue and the claim chooses the jobs; without, each names its job. A
        malformed, unknown or repeated id is refused: a job is never granted twice."""
        require_name("worker_id", worker_id)
        require_batch("requests", job_ids)
        _require_runnable(runnable)
        if not queue:
            distinct = list(dict.fromkeys(j for j in job_ids if is_uuid(j)))
            claimed = await self._claims.claim_jobs(distinct, worker_id, list(runnable) or None)
            answers = dict(zip(distinct, claimed, strict=True))
            refused = LockRefusal()
            return await self._with_steps([answers.pop(j, refused) for j in job_ids])
        require_queue(queue, self._claims.queue_names)
        claim = await self._claims.claim_queue(
            queue, len(job_ids), worker_id, list(runnable) or None
        )
        unused = len(job_ids) - len(claim.grants)
        metrics.tokens_unused(queue, unused, handed_back=claim.retry_after is not None)
        return await self._with_steps([*claim.grants, *[LockRefusal(claim.retry_after)] * unused])

    def check_wanted(
        self, wanted: Mapping[str, int], worker_id: str, runnable: Sequence[str]
    ) -> None:
        """Refuses grants asked for with results (lock on submit) that LockJobs would refuse:
        an unknown queue, a count outside 1..MAX_BATCH, no worker, malformed definitions.
        Called before the results are committed, so that a refusal writes nothing."""
        if not wanted:
            return
        require_name("worker_id", worker_id)
        _require_runnable(runnable)
        for queue, count in wanted.items():
            require_queue(queue, self._claims.queue_names)
            if not 1 <= count <= MAX_BATCH:
                raise InvalidInput(
                    "next_grants.slots is out of range",
                    [FieldViolation("next_grants.slots", f"1 to {MAX_BATCH}")],
                )

    async def with_results(
        self, wanted: Mapping[str, int], worker_id: str, runnable: Sequence[str]
    ) -> list[LockGrant]:
        """Lock on submit: up to ``wanted[queue]`` of each queue's jobs due for
        ``BACKLOG_AFTER_S`` at least, granted to ``worker_id`` by the queue's claim, as
        LockJobs would for as many work tokens. The results were committed first and stand
        whatever the grants do: a claim that fails grants nothing (the worker fetches work
        tokens)."""
        grants: list[LockGrant] = []
        if tracing.enabled():
            # a grant answered here carries no trace context yet: with tracing on, the
            # worker's jobs come with their dispatch messages, whose headers carry it
            return grants
        for queue, count in wanted.items():
            try:
                granted = await self._grant(
                    queue, count, worker_id, list(runnable) or None, due_for_s=BACKLOG_AFTER_S
                )
            except Exception:
                log.exception("queue %s: granting with submitted results failed", queue)
                continue
            metrics.grants_on_submit(queue, len(granted))
            grants += granted
        return grants

    async def push(self, messages: Sequence[OutboxMessage], owner: str) -> set[int]:
        """Grants what it can for the dispatch messages among ``messages`` (claimed by the
        dispatcher ``owner``) to waiting workers; returns the ids of the messages those
        grants used: each grant's statement marked them published (do not send them)."""
        if self.waiting is None or tracing.enabled():
            return set()  # a pushed grant carries no trace context yet: publish, as before
        tokens: dict[str, list[int]] = {}
        for message in messages:
            if message.subject.startswith(DISPATCH_PREFIX):
                queue = message.subject.removeprefix(DISPATCH_PREFIX)
                tokens.setdefault(queue, []).append(message.id)
        used: set[int] = set()
        for queue, ids in tokens.items():
            while ids and (worker := self.waiting.most_room(queue)) is not None:
                want = min(len(ids), worker.room(queue))
                mark = DispatchMark(owner, tuple(ids[:want]))
                grants = await self._grant(
                    queue, want, worker.worker_id, worker.definitions, mark=mark
                )
                if grants:
                    fault_hooks.grants_committed()
                    await self._send(worker, queue, grants)
                    used.update(ids[: len(grants)])
                    del ids[: len(grants)]
                if len(grants) < want:
                    break  # nothing more is eligible in this queue now
        return used

    def hand_back(self, worker_id: str, grants: list[LockGrant]) -> None:
        """Grants queued for a session that ended before they were sent: handed back in the
        background (called from the stream's teardown, which may be cancelled)."""
        task = asyncio.create_task(self._hand_back(worker_id, grants), name="grants-back")
        self._handing_back.add(task)
        task.add_done_callback(self._handing_back.discard)

    async def _grant(
        self,
        queue: str,
        want: int,
        worker_id: str,
        definitions: list[str] | None,
        *,
        due_for_s: float = 0.0,
        mark: DispatchMark | None = None,
    ) -> list[LockGrant]:
        """Up to ``want`` of the queue's best eligible jobs granted to ``worker_id``, with
        their recorded steps, for no work token. ``due_for_s``: only jobs due for that long
        at least; ``mark``: the dispatch rows the grants use, marked with them."""
        # no work tokens to answer: the claim spares the statement that decides their fate
        claim = await self._claims.claim_queue(
            queue, want, worker_id, definitions, tokens=False, due_for_s=due_for_s, mark=mark
        )
        return [g for g in await self._with_steps(list(claim.grants)) if isinstance(g, LockGrant)]

    async def _send(self, worker: WaitingWorker, queue: str, grants: list[LockGrant]) -> None:
        if worker.deliver(grants):
            worker.pushed(queue, len(grants))
            metrics.grants_pushed(queue, len(grants))
            return
        if self.waiting is not None:
            self.waiting.close(worker.session_id)
        await self._hand_back(worker.worker_id, grants)

    async def _hand_back(self, worker_id: str, grants: list[LockGrant]) -> None:
        log.info(
            "worker %s: session ended before %d pushed grants were sent; handing them back",
            worker_id,
            len(grants),
        )
        for grant in grants:
            try:
                await self._leases.submit_failure(
                    grant.job_id, grant.lease_token, "WORKER_SHUTDOWN", NOT_DELIVERED
                )
            except Exception:  # the lease expires and the reaper ends it
                log.exception("job %s: handing back an undelivered grant failed", grant.job_id)

    async def _with_steps(
        self, answers: list[LockGrant | LockRefusal]
    ) -> list[LockGrant | LockRefusal]:
        """Each grant with the steps its job's earlier attempts recorded, provider calls and
        durable steps' outcomes (read only for the grants the claim saw steps for: most jobs
        have none, and even a first attempt may have some, since an attempt handed back by
        a draining worker is refunded and its successor has the same number). Inputs and
        steps leave opened (sealed at rest)."""
        answers = [await self._opened(a) for a in answers]
        ids = [a.job_id for a in answers if isinstance(a, LockGrant) and a.has_steps]
        if not ids:
            return answers
        steps = await self._steps.steps_of(ids)
        results = await self._steps.step_results_of(ids)
        return [
            replace(
                a,
                recorded_steps=tuple(
                    [
                        await self._sealer.opened_step(a.user_id, a.job_id, s)
                        for s in steps.get(a.job_id, ())
                    ]
                ),
                step_results=tuple(
                    [
                        await self._sealer.opened_step_result(a.user_id, a.job_id, r)
                        for r in results.get(a.job_id, ())
                    ]
                ),
            )
            if isinstance(a, LockGrant) and (a.job_id in steps or a.job_id in results)
            else a
            for a in answers
        ]

    async def _opened(self, answer: LockGrant | LockRefusal) -> LockGrant | LockRefusal:
        if not isinstance(answer, LockGrant):
            return answer
        opened = await self._sealer.open(answer.user_id, answer.job_id, INPUT, answer.input)
        return answer if opened is answer.input else replace(answer, input=opened)


def _require_runnable(runnable: Sequence[str]) -> None:
    if len(runnable) > MAX_RUNNABLE or not all(map(DEFINITION_ID.fullmatch, runnable)):
        raise InvalidInput(
            "runnable_definitions is malformed",
            [FieldViolation("runnable_definitions", f"at most {MAX_RUNNABLE} of job_type@version")],
        )

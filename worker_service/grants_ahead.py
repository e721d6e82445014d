"""Grants ahead (ADR 0009): jobs that reach this worker without a dispatch message of their
own, in the slots of their queue's intake.

- **Pushed grants.** The session reports the free slots per queue (``report``) whenever
  they change (``changed``), and the job service pushes grants for them down the session as
  jobs become due (``pushed``).
- **Lock on submit.** While a queue looks backed up (its last fetch came back full, or
  its last results were granted all they asked for), a batch of results asks for as many
  jobs of that queue as it frees slots (``wanted``); the job service answers them with the
  results (``granted``).

Either way a grant is an ordinary lease, run by the queue's intake like a locked dispatch.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from shared.registry import JobDefinition
from worker_service import stage_times
from worker_service.domain.model import LockedJob, ResultSubmission
from worker_service.intake import QueueIntake


class GrantsAhead:
    def __init__(
        self,
        intakes: Sequence[QueueIntake],
        lookup: Callable[[str], JobDefinition],
        *,
        worker_id: str,
        definitions: Sequence[str],
    ) -> None:
        """``lookup``: a job type's definition, for its queue (a type this worker does not
        know runs in its first queue's intake, and fails there as unknown)."""
        self._intakes = {intake.queue: intake for intake in intakes}
        self._lookup = lookup
        self.worker_id = worker_id
        self.definitions = list(definitions)
        # set whenever a slot count may have changed: the session reports them again
        self.changed = asyncio.Event()
        # pushed grants taken in the current session (the job service counts the same)
        self._taken = 0
        self._taken_by_queue: Counter[str] = Counter()
        # what the last report said: free slots and taken grants per queue (None: none yet)
        self._reported: tuple[dict[str, int], Counter[str]] | None = None
        for intake in intakes:
            intake.on_slots_changed(self.changed.set)

    def session_opened(self) -> None:
        """A new session counts its pushed grants from zero."""
        self._taken = 0
        self._taken_by_queue = Counter()
        self._reported = None

    def report(self) -> tuple[dict[str, int], int]:
        """The free slots per queue (queues with none left out), and how many pushed grants
        this session has taken, as of now (what ``drifted`` compares with next)."""
        free = {queue: intake.free for queue, intake in self._intakes.items() if intake.free > 0}
        self._reported = (free, Counter(self._taken_by_queue))
        return free, self._taken

    def drifted(self) -> bool:
        """Whether the job service's view of the free slots is worth correcting now: its
        view is the last report less the grants pushed since (at most those this worker has
        taken since). Worth it when that view exceeds a queue's free slots (slots taken by
        fetched jobs: it could push more than there is room for), or is under half of them
        (jobs ended: it pushes less than it could). Anything smaller waits for the next
        regular report: a busy worker's slots change with every job, and a report per
        change cost the job service more than the pushes it informs (issue 42)."""
        if self._reported is None:
            return True
        free_then, taken_then = self._reported
        for queue, intake in self._intakes.items():
            taken_since = self._taken_by_queue[queue] - taken_then[queue]
            view, free = free_then.get(queue, 0) - taken_since, intake.free
            if view > free or 2 * view < free:
                return True
        return False

    def pushed(self, jobs: Sequence[LockedJob]) -> None:
        """Grants the job service pushed down the session: each runs now."""
        stage_times.mark((job.job_id for job in jobs), "pushed")
        self._taken += len(jobs)
        self._taken_by_queue.update(self._intake_of(job.job_type).queue for job in jobs)
        self._run(jobs)

    def wanted(self, submissions: Sequence[ResultSubmission]) -> dict[str, int]:
        """Per queue, the jobs to ask for with these results: one per result, the slot it
        frees, while the queue looks backed up and its intake is not stopping."""
        finishing = Counter(s.queue for s in submissions if s.queue in self._intakes)
        wanted = {q: self._intakes[q].wanted_with_results(n) for q, n in finishing.items()}
        return {queue: n for queue, n in wanted.items() if n > 0}

    def granted(self, jobs: Sequence[LockedJob], wanted: Mapping[str, int]) -> None:
        """Jobs granted with submitted results that asked for ``wanted``: each runs now."""
        per_queue = Counter(self._intake_of(job.job_type).queue for job in jobs)
        for queue, asked in wanted.items():
            if (intake := self._intakes.get(queue)) is not None:
                intake.granted_with_results(asked, per_queue[queue])
        self._run(jobs)

    def _run(self, jobs: Sequence[LockedJob]) -> None:
        for job in jobs:
            self._intake_of(job.job_type).take(job)

    def _intake_of(self, job_type: str) -> QueueIntake:
        try:
            queue = self._lookup(job_type).queue
        except Exception:
            queue = ""
        return self._intakes.get(queue) or next(iter(self._intakes.values()))

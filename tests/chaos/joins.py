"""Fan-in in the chaos workload (issue 30): joins that wait for other jobs, and their check.

The load, beside the steady creates: every ``Profile.join_every_s`` a group of one user's
jobs is created in one CreateJobs (synthetic kinds of the workload: quick, slow and flaky
ones; in a "mixed" group also fatal ones and ones the client cancels), and once every one
is acknowledged, their join: a quick synthetic job created with ``depends_on`` their ids
(by CreateJob, or one time in three as a CreateJobs of one), with the policy RUN (most),
FAIL or CANCEL. The run's first join waits for ``FIRST_GROUP`` (200) jobs, the others for
a log-uniform 1..``GROUP_MAX``; one in five also waits for its user's previous join (a
chain: a join its policy ended counts as a failed or cancelled dependency of the next).
The faults meanwhile kill and pause workers and replicas as they do to every job.

The check, from the database after the run, for every join (its edges in
``job_dependencies``, each dependency's row in ``jobs``, its own timeline):

- edges      the join waits for exactly the jobs it was created with, under its policy
- counted    each edge marked its dependency ended with the status it ended with (the
             resolver's own count is the server's business: a wrong one shows as a join
             started early, or one stuck, below)
- never before  no attempt of the join started (a transition into running, or its
             ``started_at``) before its last dependency's ``finished_at``, and it left
             CREATED once (one release)
- ran        a join its policy lets run (RUN; FAIL or CANCEL with every dependency
             succeeded) succeeded
- never ran  a FAIL (CANCEL) join with a failed or cancelled dependency ended FAILED with
             DEPENDENCY_FAILED (CANCELLED, DEPENDENCY_CANCELLED), attempt_count 0 and no
             attempt started, not before such a dependency ended

Each breach is a violation. Joins and their dependencies are submissions like the others:
lost, duplicated and stuck count them in the totals (a join still waiting at the end is
lost: never started), and the report's ``joins`` row says how many were judged and how.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from shared.registry import DependencyPolicy
from tests.chaos.workload import KINDS, JobKind, SideLoad, Submission, Workload

if TYPE_CHECKING:
    from tests.chaos.checker import Report

# The run's first join waits for this many jobs (the most a join of the run has); the
# others for a log-uniform 1..GROUP_MAX: about 7 on average, so that a join every 3 s
# adds about 2.5 jobs a second to the short profile's 6.
FIRST_GROUP = 200
GROUP_MAX = 24
# (policy, weight): mostly RUN
POLICY_WEIGHTS = {DependencyPolicy.RUN: 7, DependencyPolicy.FAIL: 2, DependencyPolicy.CANCEL: 1}
# a group that may fail: besides its succeeding kinds, fatal ones and ones the client cancels
MIXED_SHARE = 0.5
CLEAN_KINDS = {"quick": 70, "slow": 15, "flaky": 15}
MIXED_KINDS = {**CLEAN_KINDS, "fatal": 12, "hang-cancelled": 6, "cancel-race": 7}
# a join that also waits for its user's previous join
CHAIN_SHARE = 0.2
# a join created by CreateJobs (of one) instead of CreateJob
BATCHED_SHARE = 1 / 3
USERS = 7
BROKEN = frozenset({"failed", "cancelled"})
TERMINAL = frozenset({"succeeded", *BROKEN})
# what a join ends as when its policy ends it: (status, error code)
ENDED_BY_POLICY = {
    DependencyPolicy.FAIL: ("failed", "DEPENDENCY_FAILED"),
    DependencyPolicy.CANCEL: ("cancelled", "DEPENDENCY_CANCELLED"),
}


def _quick(r: random.Random) -> dict[str, Any]:
    return {"sleep_ms": r.randint(0, 50)}


JOIN_KINDS = {
    DependencyPolicy.RUN: JobKind("join-run", 0, "synthetic", _quick, frozenset({"succeeded"})),
    DependencyPolicy.FAIL: JobKind(
        "join-fail", 0, "synthetic", _quick, frozenset({"succeeded", "failed"})
    ),
    DependencyPolicy.CANCEL: JobKind(
        "join-cancel", 0, "synthetic", _quick, frozenset({"succeeded", "cancelled"})
    ),
}
_BY_NAME = {k.name: k for k in KINDS}


def load(every_s: float | None, seed: int) -> tuple[SideLoad, ...]:
    """The join load of a profile (none when ``every_s`` is None), drawn from its own
    random stream so that it does not shift the steady creates' draws."""
    if every_s is None:
        return ()
    return (Joins(every_s, random.Random(f"joins-{seed}")).run,)


class Joins:
    """Creates a group and its join every ``every_s`` until the workload stops."""

    def __init__(self, every_s: float, rng: random.Random) -> None:
        self.every_s = every_s
        self.rng = rng
        # per user, the latest join created (a chain's link)
        self._last: dict[str, Submission] = {}

    async def run(self, workload: Workload) -> None:
        n = 0
        while True:
            size = FIRST_GROUP if n == 0 else self._size()
            workload.track(self._group(workload, n, size), f"join-{n}")
            n += 1
            if await workload.stopped_within(self.every_s):
                return

    def _size(self) -> int:
        return min(int(math.exp(self.rng.uniform(0.0, math.log(GROUP_MAX + 1)))), GROUP_MAX)

    async def _group(self, workload: Workload, n: int, size: int) -> None:
        rng = self.rng
        user = f"chaos-user-{n % USERS}"
        weights = MIXED_KINDS if rng.random() < MIXED_SHARE else CLEAN_KINDS
        names = rng.choices(list(weights), list(weights.values()), k=size)
        deps = [
            Submission(f"join-{n}-dep-{i}", user, _BY_NAME[name]) for i, name in enumerate(names)
        ]
        policy = rng.choices(list(POLICY_WEIGHTS), list(POLICY_WEIGHTS.values()))[0]
        join = Submission(f"join-{n}", user, JOIN_KINDS[policy], policy=policy)
        previous = self._last.get(user)
        chained = previous is not None and rng.random() < CHAIN_SHARE
        batched = rng.random() < BATCHED_SHARE
        inputs = [d.kind.draw_input(rng) for d in deps]
        join_input = join.kind.draw_input(rng)
        self._last[user] = join
        workload.submissions += deps
        acked = await workload.client.create_many(deps, inputs)
        for dep in deps:
            if dep.job_id is not None and dep.kind.cancel_after is not None:
                workload.track(workload.follow_up(dep), f"follow-{dep.key}")
        if acked < len(deps):
            return  # a join of what the client knows of only: not made
        ids = [d.job_id for d in deps if d.job_id is not None]
        if chained and previous is not None and previous.job_id is not None:
            ids.append(previous.job_id)
        join.depends_on = tuple(ids)
        workload.submissions.append(join)
        if batched:
            await workload.client.create_many([join], [join_input])
        else:
            await workload.client.create(join, join_input)


# ------------------------------------------------------------------------------ the check

JOINS = """
SELECT j.id::text AS id, j.user_id, j.idempotency_key AS key, j.status, j.error_code,
       j.attempt_count, j.dependency_policy AS policy,
       j.created_at, j.started_at, j.finished_at,
       (SELECT min(e.created_at) FROM job_events e
        WHERE e.job_id = j.id AND e.to_status = 'running') AS first_started,
       (SELECT count(*) FROM job_events e
        WHERE e.job_id = j.id AND e.to_status = 'running') AS attempts_started,
       (SELECT count(*) FROM job_events e
        WHERE e.job_id = j.id AND e.from_status = 'created') AS releases
FROM unnest($1::text[], $2::text[]) AS s(user_id, key)
JOIN jobs j ON j.user_id = s.user_id AND j.idempotency_key = s.key AND j.job_type = $3
"""

# every edge of these joins, with its dependency as it is now (NULL: no such job)
EDGES = """
SELECT e.job_id::text AS join_id, e.depends_on_id::text AS id, e.ended_status, e.ended_at,
       d.status, d.finished_at
FROM job_dependencies e LEFT JOIN jobs d ON d.id = e.depends_on_id
WHERE e.job_id = ANY($1::uuid[])
"""

Row = asyncpg.Record | Mapping[str, Any]


@dataclass
class Verdict:
    """One join judged: how it ended (``outcome``), its breaches, and the seconds from its
    last dependency's end to its first attempt (None: it never started)."""

    outcome: str
    violations: list[str]
    release_s: float | None = None
    # a dependency not ended: the join cannot be judged (that job is stuck or lost)
    unjudged: str | None = None
    # a dependency ended after the join was created: the join waited (the trigger counted
    # it), rather than finding every dependency ended when it was attached
    waited: bool = False


def judge(sub: Submission, join: Row, edges: Sequence[Row]) -> Verdict:
    """The rules of the module docstring, for one join and its edges."""
    policy = sub.policy or DependencyPolicy.FAIL
    what = f"{sub.key} (join-{policy.value} of {len(edges)}) job {join['id']}"
    bad: list[str] = []
    if join["policy"] != policy.value:
        bad.append(f"{what}: stored with policy {join['policy']}, created with {policy.value}")
    stored = {e["id"] for e in edges}
    asked = set(sub.depends_on)
    if stored != asked:
        bad.append(
            f"{what}: waits for {sorted(stored - asked)[:3]} it was not created with, not for"
            f" {sorted(asked - stored)[:3]} ({len(stored ^ asked)} differ)"
        )
    unended = [e for e in edges if e["status"] not in TERMINAL]
    if unended:
        first = unended[0]
        return Verdict(
            "unjudged",
            bad,
            unjudged=f"{what}: dependency {first['id']} {first['status'] or 'not stored'}"
            f" ({len(unended)} not ended)",
        )
    for e in edges:
        if e["ended_status"] != e["status"]:
            bad.append(
                f"{what}: dependency {e['id']} ended {e['status']}, counted as {e['ended_status']}"
            )
        if e["finished_at"] is None:
            bad.append(f"{what}: dependency {e['id']} ended {e['status']} without finished_at")
    # a dependency's end: its finished_at, or the edge's count of it if later (a join
    # created after its dependency ended counts it then)
    ended = [
        (max(t for t in (e["finished_at"], e["ended_at"]) if t is not None), e)
        for e in edges
        if e["finished_at"] is not None or e["ended_at"] is not None
    ]
    started = _earliest(join["first_started"], join["started_at"])
    waited = any(e["finished_at"] > join["created_at"] for e in edges if e["finished_at"])
    release_s = None
    if started is not None and ended:
        last_end, last = max(ended, key=lambda pair: pair[0])
        release_s = (started - last_end).total_seconds()
        if started < last_end:
            bad.append(
                f"{what}: started at {started.isoformat()}, {-release_s:.3f}s before its last"
                f" dependency {last['id']} ended ({last['status']} at {last_end.isoformat()})"
            )
    broken = [e for e in edges if e["status"] in BROKEN]
    state = (
        f"{join['status']} ({join['error_code'] or 'no error'}), {join['attempt_count']} attempts"
    )
    if policy is DependencyPolicy.RUN or not broken:
        if join["status"] != "succeeded":
            bad.append(f"{what}: {state}; its dependencies all ended and it may run")
        if started is not None and join["releases"] != 1:
            bad.append(f"{what}: left CREATED {join['releases']} times")
        return Verdict(f"{policy.value}: ran", bad, release_s, waited=waited)
    status, code = ENDED_BY_POLICY[policy]
    if (join["status"], join["error_code"]) != (status, code):
        bad.append(f"{what}: {state}; a dependency ended {broken[0]['status']}: {status} ({code})")
    if join["attempt_count"] or join["attempts_started"] or started is not None:
        bad.append(f"{what}: ran ({state}) though a dependency ended {broken[0]['status']}")
    first_broken = _earliest(*(e["finished_at"] for e in broken))
    if join["finished_at"] is not None and first_broken and join["finished_at"] < first_broken:
        bad.append(
            f"{what}: ended at {join['finished_at'].isoformat()}, before any dependency failed"
            f" or was cancelled ({first_broken.isoformat()})"
        )
    return Verdict(f"{policy.value}: ended by a dependency", bad, release_s, waited=waited)


def _earliest(*times: datetime | None) -> datetime | None:
    present = [t for t in times if t is not None]
    return min(present) if present else None


async def check(pool: asyncpg.Pool, submissions: Iterable[Submission], report: Report) -> None:
    """Judges every stored join; adds its breaches to ``report`` and the ``joins`` row."""
    joins = {(s.user_id, s.key): s for s in submissions if s.policy is not None}
    if not joins:
        return
    users, keys = zip(*joins, strict=True)
    rows = await pool.fetch(JOINS, list(users), list(keys), "synthetic")
    edges: dict[str, list[Row]] = {r["id"]: [] for r in rows}
    for edge in await pool.fetch(EDGES, list(edges)):
        edges[edge["join_id"]].append(edge)
    verdicts = [judge(joins[(r["user_id"], r["key"])], r, edges[r["id"]]) for r in rows]
    for verdict in verdicts:
        report.violations += verdict.violations
        if verdict.unjudged:
            report.notes.append(f"join not judged: {verdict.unjudged}")
    report.joins = len(verdicts)
    report.joins_detail = summary(verdicts, [len(e) for e in edges.values()])
    stored = set(edges)
    chained = sum(1 for s in joins.values() if stored.intersection(s.depends_on))
    report.joins_detail += f"; {chained} also waited for an earlier join"


def summary(verdicts: Sequence[Verdict], sizes: Sequence[int]) -> str:
    outcomes = Counter(v.outcome for v in verdicts)
    waits = [v.release_s for v in verdicts if v.release_s is not None]
    told = ", ".join(f"{o} {n}" for o, n in sorted(outcomes.items()))
    most, least = max(sizes, default=0), min(sizes, default=0)
    waited = sum(v.waited for v in verdicts)
    detail = f"{sum(sizes)} dependencies ({least}..{most} a join), {waited} joins waited; {told}"
    if waits:
        detail += (
            f"; last dependency ended to first attempt: median {statistics.median(waits):.2f} s,"
            f" most {max(waits):.2f} s"
        )
    return detail

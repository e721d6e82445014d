"""How hard a chaos run pushes: the short profile (CI, ``make chaos``) and the long one.

Both run the same stack settings (``STACK``): leases and loops short enough that every
recovery fits in seconds, so a run of a few minutes goes through every fault kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from job_service.fault_hooks import ARMED_BY_SIGNAL, KILL_BEFORE_PUSH
from tests.chaos.agent_faults import AGENT_FAULT_KINDS
from tests.chaos.faults import FAULT_KINDS
from tests.chaos.grant_faults import GRANT_FAULT_KINDS
from tests.chaos.replica_faults import REPLICA_FAULT_KINDS
from tests.chaos.session_faults import SESSION_FAULT_KINDS
from tests.chaos.step_faults import STEP_FAULT_KINDS

# The scheduler's test job types (``keyed``: a concurrency key per user; ``metered``: the
# cheap model tier), loaded by every job_service replica and worker.
# ``redacted_feynman`` (tests.support.redacted_jobtypes): an AI job type with output_redaction,
# for the checker's redaction rule.
# ``agent`` (tests.support.agent_jobtypes): durable steps, a sleep and a signal wait, for
# the checker's agent rules (tests/chaos/agents.py).
SCHED_JOB_TYPE_MODULES = (
    "tests.support.sched_jobtypes,tests.support.redacted_jobtypes,tests.support.agent_jobtypes"
)
# The fleet-wide rate limit of the cheap tier (``metered`` jobs and feynman's review-card
# children, about 0.2 cheap calls per created job): 20 requests a minute per job created a
# second, about 1.6 times the workload's mean demand, so that it holds back bursts and
# backlogs after faults without starving the tier (120/min for the short profile's 6 jobs a
# second). A fixed 120/min left the long profile's 12 jobs a second about 150 calls a
# minute of demand: seed 41 ended with 165 children still waiting for the tier.
CHEAP_RPM_PER_CREATE_RATE = 20


def rate_limits(create_rate: float) -> dict[str, dict[str, int]]:
    rpm = round(CHEAP_RPM_PER_CREATE_RATE * create_rate)
    return {"cheap": {"requests_per_minute": rpm, "burst_requests": 2}}


RATE_LIMITS = rate_limits(6.0)

# A process of the stack that crashes in native code (a segmentation fault) writes every
# thread's Python stack to its stderr, which is its log in the run's log directory (issue
# 43: a crash printed only "Fatal Python error" and no process name).
NATIVE_CRASH_TRACES = {"PYTHONFAULTHANDLER": "1"}

# Every fault kind that runs on the default stack (one NATS server, no standby), each once:
# what the medium profile injects and the long one draws from (issue 43: the medium profile
# ran 9 of 18, so a regression under one of the others waited for a run by hand).
ALL_FAULT_KINDS = tuple(
    dict.fromkeys(
        FAULT_KINDS
        + SESSION_FAULT_KINDS
        + STEP_FAULT_KINDS
        + REPLICA_FAULT_KINDS
        + GRANT_FAULT_KINDS
        + AGENT_FAULT_KINDS
    )
)


@dataclass(frozen=True)
class StackSettings:
    """What every job_service replica and worker of the run is configured with."""

    lease_ttl_s: float = 2.0
    heartbeat_interval_s: float = 0.5
    reaper_interval_s: float = 0.5
    # a crashed worker's leases end this long after its session closed (ADR 0003)
    worker_disconnect_grace_s: float = 0.5
    outbox_poll_interval_s: float = 0.2
    # a claim left by a killed replica is taken over after this long
    outbox_claim_ttl_s: float = 3.0
    reconcile_after_s: float = 3.0
    reconcile_interval_s: float = 1.0
    service_shutdown_grace_s: float = 2.0
    worker_shutdown_grace_s: float = 3.0
    worker_fetch_timeout_s: float = 0.25
    # the synthetic job type's retry backoff (jobtypes/synthetic.py): the first delay
    # after an expired lease is at most this
    first_backoff_s: float = 0.2
    # the AI job types' (jobtypes/review_card_generation.py's is the longest): the first
    # delay after an expired lease of an AI job is at most this
    ai_first_backoff_s: float = 2.0
    job_type_modules: str = SCHED_JOB_TYPE_MODULES
    # one priority level is worth this much waiting (default 10 s): a job overtaken by
    # better-placed work (a token re-sent for it after NATS lost its store grants the best
    # job in line) waits at most (priority gap x step), which the bounds' slack absorbs
    priority_step_s: float = 0.25
    rate_limits: str = json.dumps(RATE_LIMITS)
    # PostgreSQL ends a replica's session left idle in a transaction this long (JOBS_DB_
    # IDLE_IN_TRANSACTION_TIMEOUT_S, 3 s by default): short like the leases, and under them,
    # so that a live worker's heartbeats get past a frozen replica's row locks before its
    # lease ends. The frozen and cut-off replica faults' bounds follow from it.
    idle_in_transaction_timeout_s: float = 1.0

    def job_service_env(self) -> dict[str, str]:
        return {
            # armed by SIGUSR1: the service_kill_pushing fault (tests/chaos/grant_faults.py)
            KILL_BEFORE_PUSH: ARMED_BY_SIGNAL,
            "JOBS_LEASE_TTL_S": str(self.lease_ttl_s),
            "JOBS_HEARTBEAT_INTERVAL_S": str(self.heartbeat_interval_s),
            "JOBS_REAPER_INTERVAL_S": str(self.reaper_interval_s),
            "JOBS_WORKER_DISCONNECT_GRACE_S": str(self.worker_disconnect_grace_s),
            "JOBS_OUTBOX_POLL_INTERVAL_S": str(self.outbox_poll_interval_s),
            "JOBS_OUTBOX_CLAIM_TTL_S": str(self.outbox_claim_ttl_s),
            "JOBS_RECONCILE_AFTER_S": str(self.reconcile_after_s),
            "JOBS_RECONCILE_INTERVAL_S": str(self.reconcile_interval_s),
            "JOBS_SHUTDOWN_GRACE_S": str(self.service_shutdown_grace_s),
            "JOBS_DB_POOL_SIZE": "6",
            # per-user limits off: the run is about faults, and its few users create
            # thousands of jobs
            "JOBS_MAX_ACTIVE_JOBS_PER_USER": "0",
            "JOBS_DAILY_JOB_QUOTA_PER_USER": "0",
            "JOBS_LOG_LEVEL": "INFO",
            "JOBS_JOB_TYPE_MODULES": self.job_type_modules,
            "JOBS_RATE_LIMITS": self.rate_limits,
            "JOBS_SCHED_PRIORITY_STEP_S": str(self.priority_step_s),
            "JOBS_DB_IDLE_IN_TRANSACTION_TIMEOUT_S": str(self.idle_in_transaction_timeout_s),
            **NATIVE_CRASH_TRACES,
        }

    def worker_env(self) -> dict[str, str]:
        return {
            "JOBS_WORKER_SHUTDOWN_GRACE_S": str(self.worker_shutdown_grace_s),
            "JOBS_WORKER_FETCH_TIMEOUT_S": str(self.worker_fetch_timeout_s),
            "JOBS_LOG_LEVEL": "INFO",
            # the fake model provider: a little latency, and one call in ten fails retryably
            "JOBS_FAKE_LATENCY_MS": "50",
            "JOBS_FAKE_FAILURE": "PROVIDER_UNAVAILABLE",
            "JOBS_FAKE_FAILURE_RATE": "0.1",
            "JOBS_JOB_TYPE_MODULES": self.job_type_modules,
            **NATIVE_CRASH_TRACES,
        }

    # -- the bounds the run holds the stack to (seconds); SLACK absorbs a loaded machine

    SLACK_S = 3.0

    def worker_recovery_bound_s(self) -> float:
        """A dead or paused worker's job runs again within lease + reaper + first backoff."""
        return self.lease_ttl_s + self.reaper_interval_s + self.first_backoff_s + self.SLACK_S

    def ai_recovery_bound_s(self) -> float:
        """A dead worker's AI job runs again within lease + reaper + its type's first
        backoff: a worker killed with no successor is found by its lease running out
        (ADR 0003: crash detection by process incarnation)."""
        return self.lease_ttl_s + self.reaper_interval_s + self.ai_first_backoff_s + self.SLACK_S

    def redispatch_bound_s(self) -> float:
        """A job whose dispatch message NATS lost runs again within the reconciler's bound."""
        return self.reconcile_after_s + self.reconcile_interval_s + self.SLACK_S

    HELD_SLACK_S = 2.0

    def held_rows_bound_s(self) -> float:
        """A replica frozen or cut off inside a transaction has it ended by the server, and
        a statement waiting for the rows it held gets them, within the idle-in-transaction
        timeout (plus HELD_SLACK_S)."""
        return self.idle_in_transaction_timeout_s + self.HELD_SLACK_S

    def slot_bound_s(self) -> float:
        """A schedule slot due meanwhile fires within the held rows' bound plus the firing
        loop's longest sleep (1 s)."""
        return self.held_rows_bound_s() + 1.0

    def sigterm_bound_s(self) -> float:
        """A SIGTERM'd worker exits within its grace period plus the hand-back round trip."""
        return self.worker_shutdown_grace_s + self.SLACK_S


@dataclass(frozen=True)
class Profile:
    name: str
    # CreateJob calls per second while faults are injected
    rate: float
    # the faults, in order (short); or None: random kinds until `duration_s` (long)
    schedule: tuple[str, ...] | None
    duration_s: float
    # load without faults before the first and between two faults
    settle_s: float
    # how long the stack gets to finish every job once the faults stop
    quiesce_timeout_s: float
    workers: int = 3
    replicas: int = 2
    # NATS servers: 1, or 3 as a JetStream cluster with R3 streams (tests/chaos/nats_cluster.py)
    nats_servers: int = 1
    # PostgreSQL as a primary with a synchronous streaming standby (tests/chaos/pg_failover.py)
    pg_standby: bool = False
    # the kinds a profile without a schedule draws from (None: FAULT_KINDS)
    random_kinds: tuple[str, ...] | None = None
    # a join and the group it waits for created this often (tests/chaos/joins.py); None:
    # no joins
    join_every_s: float | None = None

    def stack_settings(self) -> StackSettings:
        """The stack's settings, the cheap tier's limit sized to this profile's load."""
        return StackSettings(rate_limits=json.dumps(rate_limits(self.rate)))


# The cluster profile: the NATS cluster's faults (tests/chaos/cluster_faults.py), each
# twice (leader and follower kill, partition, quorum loss), among a few of the others.
CLUSTER_SCHEDULE = (
    "nats_leader_kill",
    "nats_follower_kill",
    "nats_partition",
    "worker_kill",
    "nats_quorum_loss",
    "duplicate_dispatch",
    "nats_leader_kill",
    "service_kill",
    "nats_partition",
    "nats_follower_kill",
    "nats_quorum_loss",
    "postgres_restart",
)


PROFILES = {
    "short": Profile(
        name="short",
        rate=6.0,
        schedule=FAULT_KINDS
        + SESSION_FAULT_KINDS
        + STEP_FAULT_KINDS
        + REPLICA_FAULT_KINDS
        + GRANT_FAULT_KINDS
        + AGENT_FAULT_KINDS,
        duration_s=0.0,
        settle_s=2.0,
        quiesce_timeout_s=60.0,
        join_every_s=3.0,
    ),
    # CI's (.ci/run, a seed drawn per run): faults of every kind drawn at random for
    # duration_s under a backlog, joins, schedules, signals, steps and grants pushed ahead
    "long": Profile(
        name="long",
        rate=12.0,
        schedule=None,
        duration_s=600.0,
        settle_s=3.0,
        quiesce_timeout_s=120.0,
        random_kinds=ALL_FAULT_KINDS,
        join_every_s=3.0,
    ),
    # the long profile's load (a backlog) and every fault kind once, in about 2 minutes: a
    # liveness regression under a backlog fails CI (`make test-chaos`), not only the long
    # run
    "medium": Profile(
        name="medium",
        rate=12.0,
        schedule=ALL_FAULT_KINDS,
        duration_s=0.0,
        settle_s=3.0,
        quiesce_timeout_s=120.0,
    ),
    # one failover per run (the old primary is not rejoined): load, faults around it, then
    # the primary killed and the standby promoted, then more load and faults on the new one
    "failover": Profile(
        name="failover",
        rate=6.0,
        schedule=("worker_kill", "service_kill", "pg_failover", "worker_kill", "service_kill"),
        duration_s=0.0,
        settle_s=3.0,
        quiesce_timeout_s=90.0,
        pg_standby=True,
    ),
    # the cluster's server faults once each, in about a minute: a regression of the engine
    # on a NATS cluster fails CI (`make test-chaos`), not only the full profile by hand
    "cluster-short": Profile(
        name="cluster-short",
        rate=6.0,
        schedule=("nats_leader_kill", "worker_kill", "nats_follower_kill", "service_kill"),
        duration_s=0.0,
        settle_s=2.0,
        quiesce_timeout_s=90.0,
        nats_servers=3,
    ),
    "cluster": Profile(
        name="cluster",
        rate=6.0,
        schedule=CLUSTER_SCHEDULE,
        duration_s=0.0,
        settle_s=2.0,
        quiesce_timeout_s=90.0,
        nats_servers=3,
    ),
}

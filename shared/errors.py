"""The one error tree of the product, and the codes it speaks.

Two vocabularies live here, because both services must agree on them:

* ``Reason`` — why an API call was refused. Each travels to the caller as the reason of a
  ``google.rpc.ErrorInfo`` next to a gRPC status code (see ``shared.rpc_errors``).
* ``ExecutionError`` codes — why an *attempt* failed (``job.error_code``). The prefix is the
  error class, and the class decides retries (``classify``; the policy itself lives in
  ``job_service.domain.retry``).

Every exception the product raises on purpose, by who gets to see it. Classes defined
elsewhere are named with the concern of the module that holds them.

API errors: a refused call. The job service's error interceptor is the one place that
turns them into a gRPC status (with one ErrorInfo); clients turn the status back into the
same class (``shared.rpc_errors``). The message is public: the caller reads it::

    JobsError                      (reason, public message, field violations, retry_after_s)
    ├── InvalidInput               INVALID_ARGUMENT    INVALID_INPUT
    │   └── UnknownJobType         NOT_FOUND           UNKNOWN_JOB_TYPE (no worker declared it)
    ├── JobNotFound                NOT_FOUND           JOB_NOT_FOUND
    ├── CredentialNotFound         NOT_FOUND           CREDENTIAL_NOT_FOUND
    ├── ScheduleNotFound           NOT_FOUND           SCHEDULE_NOT_FOUND
    ├── CredentialUnavailable      FAILED_PRECONDITION CREDENTIAL_UNAVAILABLE
    ├── JobNotCancellable          FAILED_PRECONDITION JOB_NOT_CANCELLABLE
    ├── JobAlreadyCancelled        FAILED_PRECONDITION JOB_ALREADY_CANCELLED
    ├── JobNotRetryable            FAILED_PRECONDITION JOB_NOT_RETRYABLE
    ├── LiveChildExists            FAILED_PRECONDITION LIVE_CHILD_EXISTS
    ├── LiveRetryExists            FAILED_PRECONDITION LIVE_RETRY_EXISTS
    ├── IdempotencyKeyReused       FAILED_PRECONDITION IDEMPOTENCY_KEY_REUSED
    ├── JobFinished                FAILED_PRECONDITION JOB_FINISHED
    ├── JobTypeSpecConflict        FAILED_PRECONDITION JOB_TYPE_SPEC_CONFLICT
    ├── UserHasRunningJobs         FAILED_PRECONDITION USER_HAS_RUNNING_JOBS
    ├── TooManyJobs                RESOURCE_EXHAUSTED  TOO_MANY_JOBS   (+ RetryInfo)
    ├── QuotaExceeded              RESOURCE_EXHAUSTED  QUOTA_EXCEEDED  (+ RetryInfo)
    ├── SignalLimitReached         RESOURCE_EXHAUSTED  SIGNAL_LIMIT_REACHED
    ├── LeaseLost                  ABORTED             LEASE_LOST
    ├── Unauthenticated            UNAUTHENTICATED     UNAUTHENTICATED
    ├── PermissionDenied           PERMISSION_DENIED   PERMISSION_DENIED
    ├── PlatformUnavailable        UNAVAILABLE         PLATFORM_UNAVAILABLE
    ├── InternalError              INTERNAL            INTERNAL
    │
    │   The job's own failure: what an attempt ends with, never the status of a call.
    └── ExecutionError             raised by job code in a worker: its code becomes
        │                          job.error_code, its class decides retries; the owner
        │                          reads the public message of the class, operators the
        │                          detail
        └── SignalWait             ctx.wait_for_signal with no signal yet (worker):
                                   SUSPENDED_SIGNAL, with the newest seq it saw

Configuration errors: raised while a process starts. It prints one sentence and exits 2
(invalid configuration) or 3 (cannot start); none is ever translated into a status::

    ValueError
    ├── AuthConfigError            job service auth: the token table is invalid      exit 2
    ├── MasterKeyError             credential sealing: a malformed master key; it is
    │                              reported among the invalid settings               exit 2
    ├── ClientConfigError          gRPC client: TLS or auth settings incomplete or
    │                              unreadable (worker)                               exit 2
    └── DefinitionError            job type registry: a definition that cannot be
                                   registered; a programming error, so it fails the
                                   start with its traceback
    RuntimeError
    └── MasterKeyMissing           credential vault: stored keys are sealed under a
                                   master key that is not configured                 exit 2
    StartupError                   start-up: the process cannot start                exit 3
    └── DependencyUnavailable      start-up: PostgreSQL, NATS or the job service stayed
                                   unreachable for the start-up timeout              exit 3
    UsageError                     jobctl command line: arguments that parse but make
                                   no sense                                          exit 2

Internal control flow: raised and caught inside one service, each translated next to
where it is raised; no caller ever sees one as such::

    IllegalTransition              job lifecycle: a step the status does not allow; a
                                   bug, so the interceptor answers InternalError
    SealBroken                     credential sealing: a sealed key does not open; the
                                   credential vault logs it and raises
                                   CredentialUnavailable
    ConnectionError
    └── DatabaseUnreachable        job service postgres adapter: no new connection; an
                                   OSError, so the interceptor answers
                                   PlatformUnavailable, and start-up retries it
    LookupError
    └── PromptNotFound             prompt registry: no such prompt version; the job
                                   raises ExecutionError instead
    ExecutorUnreachable            worker's executor port: the call may not have got
                                   through; retried
    ExecutorCallFailed             worker's executor port: the job service failed the
                                   call without a reason; not retried
    DispatchUnavailable            worker's dispatch port: NATS cannot be read right
                                   now; intake fetches again shortly
    SchemaError                    job service: a declared JSON Schema that does not
                                   compile; the spec is refused as INVALID_ARGUMENT
    ScopeError                     job service auth: a token's scope is malformed (an
                                   AuthConfigError at start-up)
    KekConfigError                 data keys: the key-encryption key setting is
                                   malformed (reported among the invalid settings)
    UnwrapFailed                   data keys: a wrapped data key does not open under
                                   any configured key-encryption key
    PayloadBroken                  sealed payloads: a ciphertext does not open for its
                                   job and field
    PayloadUnreadable              the Sealer: a stored payload does not open (its
                                   user's key erased, its KEK not configured, moved);
                                   the interceptor answers InternalError
    DataKeyChanged                 new jobs: the key a job was sealed under is no longer
                                   its user's (another replica's erase or rotation);
                                   CreateJob seals it again and stores it again
    ReplicaExited                  job service processes: one of the replicas
                                   JOBS_SERVICE_PROCESSES started exited; the others
                                   stop, and the parent exits with its status
    DevstackError                  local development stack: start-up failed or a child
                                   died; everything stops, exit 1
    Interrupted                    local development stack: Ctrl-C or SIGTERM during
                                   start-up; everything stops, exit 0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Reason(StrEnum):
    """Machine-readable reasons carried in ``google.rpc.ErrorInfo``."""

    INVALID_INPUT = "INVALID_INPUT"
    UNKNOWN_JOB_TYPE = "UNKNOWN_JOB_TYPE"
    JOB_TYPE_SPEC_CONFLICT = "JOB_TYPE_SPEC_CONFLICT"
    JOB_NOT_FOUND = "JOB_NOT_FOUND"
    CREDENTIAL_NOT_FOUND = "CREDENTIAL_NOT_FOUND"
    SCHEDULE_NOT_FOUND = "SCHEDULE_NOT_FOUND"
    CREDENTIAL_UNAVAILABLE = "CREDENTIAL_UNAVAILABLE"
    JOB_NOT_CANCELLABLE = "JOB_NOT_CANCELLABLE"
    JOB_ALREADY_CANCELLED = "JOB_ALREADY_CANCELLED"
    JOB_NOT_RETRYABLE = "JOB_NOT_RETRYABLE"
    LIVE_CHILD_EXISTS = "LIVE_CHILD_EXISTS"
    LIVE_RETRY_EXISTS = "LIVE_RETRY_EXISTS"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    JOB_FINISHED = "JOB_FINISHED"
    USER_HAS_RUNNING_JOBS = "USER_HAS_RUNNING_JOBS"
    TOO_MANY_JOBS = "TOO_MANY_JOBS"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    SIGNAL_LIMIT_REACHED = "SIGNAL_LIMIT_REACHED"
    LEASE_LOST = "LEASE_LOST"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    PLATFORM_UNAVAILABLE = "PLATFORM_UNAVAILABLE"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


class JobsError(Exception):
    """Root of the product's own errors: every error the API reports on purpose, and
    ``ExecutionError``, the failure of an attempt. ``retry_after_s`` (set on the
    RESOURCE_EXHAUSTED errors) travels as a ``google.rpc.RetryInfo``; ``metadata`` (the ids
    involved, e.g. ``job_id``) as the ``google.rpc.ErrorInfo``'s metadata."""

    reason: Reason = Reason.INTERNAL

    def __init__(
        self,
        message: str,
        violations: list[FieldViolation] | None = None,
        retry_after_s: float | None = None,
        *,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.violations = violations or []
        self.retry_after_s = retry_after_s
        self.metadata = metadata or {}


class InvalidInput(JobsError):
    reason = Reason.INVALID_INPUT


class UnknownJobType(InvalidInput):
    """No worker has declared the job type (NOT_FOUND; an InvalidInput still, so that a
    batch refuses the one item as it refuses bad input)."""

    reason = Reason.UNKNOWN_JOB_TYPE


class JobTypeSpecConflict(JobsError):
    """A worker declared a spec that differs from the one stored for its (type, version);
    the violations name each field that differs."""

    reason = Reason.JOB_TYPE_SPEC_CONFLICT


class JobNotFound(JobsError):
    reason = Reason.JOB_NOT_FOUND


class CredentialNotFound(JobsError):
    """No such credential for this user (another user's is not found either), or the
    credential a job was created with has been deleted since."""

    reason = Reason.CREDENTIAL_NOT_FOUND


class ScheduleNotFound(JobsError):
    """No such schedule for this user (another user's is not found either)."""

    reason = Reason.SCHEDULE_NOT_FOUND


class CredentialUnavailable(JobsError):
    """User credentials cannot be used here: none is configured for the job, or this
    deployment has no master key to seal or open them with."""

    reason = Reason.CREDENTIAL_UNAVAILABLE


class JobNotCancellable(JobsError):
    reason = Reason.JOB_NOT_CANCELLABLE


class JobAlreadyCancelled(JobsError):
    reason = Reason.JOB_ALREADY_CANCELLED


class JobNotRetryable(JobsError):
    reason = Reason.JOB_NOT_RETRYABLE


class LiveChildExists(JobsError):
    """RetryJob of a child whose parent already has a child of that type that is
    unfinished or succeeded (a newer retry, say): one live child per parent and type."""

    reason = Reason.LIVE_CHILD_EXISTS


class LiveRetryExists(JobsError):
    """RetryJob of a job whose original (the first job of its retry lineage) already has
    a retry that is waiting, running or succeeded, or that the same RetryJobs walk made:
    one live retry per original."""

    reason = Reason.LIVE_RETRY_EXISTS


class IdempotencyKeyReused(JobsError):
    reason = Reason.IDEMPOTENCY_KEY_REUSED


class JobFinished(JobsError):
    """The job has finished: it can no longer receive signals."""

    reason = Reason.JOB_FINISHED


class UserHasRunningJobs(JobsError):
    """EraseUserData while the user has unfinished jobs: nothing was erased."""

    reason = Reason.USER_HAS_RUNNING_JOBS


class TooManyJobs(JobsError):
    """The user has as many unfinished jobs as allowed."""

    reason = Reason.TOO_MANY_JOBS


class QuotaExceeded(JobsError):
    """The user created as many jobs today (UTC) as allowed, or spent the daily cost
    budget (ErrorInfo metadata ``quota``: ``daily_jobs`` or ``daily_cost_budget``)."""

    reason = Reason.QUOTA_EXCEEDED


class SignalLimitReached(JobsError):
    """The job holds as many signals as one job may (JOBS_MAX_SIGNALS_PER_JOB); it takes
    no more. No RetryInfo: waiting does not help, since signals leave only with their job."""

    reason = Reason.SIGNAL_LIMIT_REACHED


class Unauthenticated(JobsError):
    reason = Reason.UNAUTHENTICATED


class PermissionDenied(JobsError):
    reason = Reason.PERMISSION_DENIED


class LeaseLost(JobsError):
    reason = Reason.LEASE_LOST


class PlatformUnavailable(JobsError):
    reason = Reason.PLATFORM_UNAVAILABLE


class InternalError(JobsError):
    reason = Reason.INTERNAL


# --- why an attempt failed -------------------------------------------------------------


# The codes, their classes and public messages live in shared.attempt_errors.
from shared.attempt_errors import PUBLIC_MESSAGES as PUBLIC_MESSAGES  # noqa: E402
from shared.attempt_errors import ErrorClass as ErrorClass  # noqa: E402
from shared.attempt_errors import ErrorCode as ErrorCode  # noqa: E402
from shared.attempt_errors import classify as classify  # noqa: E402
from shared.attempt_errors import public_message as public_message  # noqa: E402


@dataclass
class ExecutionError(JobsError):
    """Raised by job code inside a worker to fail the attempt with a chosen code.

    ``detail`` is internal: it reaches operators, never the job's owner. As a
    ``JobsError`` its ``message`` is the public message of the code's class; it is not an
    API error, and no call answers with one."""

    code: str
    detail: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    # The earliest a retry makes sense (a provider's Retry-After), in seconds.
    retry_after_s: float | None = None

    def __post_init__(self) -> None:
        self.message = public_message(self.code)
        self.violations = []

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code

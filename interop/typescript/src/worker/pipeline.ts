/**
 * One attempt of a locked job, end to end (worker_service/pipeline.py): run its job type's
 * code under the spec's timeout and a heartbeat, then report the outcome — SubmitResult
 * with the output and its RFC 8785 hash, or SubmitFailure with an error code (a durable
 * sleep or signal wait with its SUSPENDED_* code, wake time and the newest signal seen).
 * Running attempts are addressable by job id, so a cancel message or a shutdown stops them.
 */
import { Code } from "@connectrpc/connect";

import type { LockedJob } from "../gen/jobs/v1/executor_service_pb.js";
import { JobStatus, JobStatusSchema } from "../gen/jobs/v1/job_pb.js";
import { Attempt, bounded, type Outcome, type StopCause } from "./attempt.js";
import type { CallPermits } from "./call_permits.js";
import { heartbeat } from "./heartbeat.js";
import type { JobType } from "./job_type.js";
import * as log from "./log.js";
import { codeOf, type Executor, isTransient, meansLeaseLost, pause } from "./rpc.js";

const SUBMIT_CALL_TIMEOUT_MS = 10_000;
const MIN_CALL_TIMEOUT_MS = 1_000;
const SUBMIT_BACKOFF_START_MS = 50;
const SUBMIT_BACKOFF_MAX_MS = 1_000;

type Failed = Extract<Outcome, { kind: "failed" }>;

export class Pipeline {
  private readonly running = new Map<string, Attempt>();
  private closing = false;

  constructor(
    private readonly executor: Executor,
    private readonly types: ReadonlyMap<string, JobType>,
    private readonly permits: CallPermits,
    private readonly workerId: string,
  ) {}

  /** Attempts executing right now (submits in progress not counted). */
  get executing(): number {
    return this.running.size;
  }

  /** Stops the job's attempt if it runs here; true when one was stopped. */
  cancel(jobId: string, cause: StopCause = "cancel_requested"): boolean {
    return this.running.get(jobId)?.cancel(cause) ?? false;
  }

  /** Stops every executing attempt, handed back as WORKER_SHUTDOWN, and refuses new ones. */
  shutdown(): number {
    this.closing = true;
    for (const attempt of this.running.values()) attempt.cancel("shutdown");
    return this.running.size;
  }

  /** Executes one attempt and reports its outcome; never rejects. */
  async run(job: LockedJob): Promise<void> {
    const attempt = new Attempt(job);
    const fields = { job_id: job.jobId, job_type: job.jobType, attempt: job.attempt, worker_id: this.workerId };
    const type = this.types.get(job.jobType);
    let outcome: Outcome;
    if (this.closing) {
      attempt.cancel("shutdown");
      outcome = { kind: "failed", code: "WORKER_SHUTDOWN", message: "handed back by a draining worker" };
    } else if (type === undefined) {
      outcome = { kind: "failed", code: "INTERNAL_ERROR", message: `no job type ${job.jobType} on this worker` };
    } else {
      log.info("attempt started", fields);
      this.running.set(job.jobId, attempt);
      const finished = new AbortController();
      const beating = heartbeat(this.executor, attempt, finished.signal);
      try {
        outcome = await attempt.execute(type, {
          acquireCallPermit: (tier) => this.permits.acquire(attempt, tier),
          executor: this.executor,
        });
      } finally {
        finished.abort();
        this.running.delete(job.jobId);
        await beating;
      }
    }
    try {
      await this.report(attempt, outcome, fields);
    } catch (caught) {
      log.error("reporting the outcome failed", { ...fields, error: log.described(caught) });
    }
  }

  private async report(attempt: Attempt, outcome: Outcome, fields: log.Fields): Promise<void> {
    if (outcome.kind === "lease_lost") {
      log.info("attempt stopped, its lease lost: another worker owns the job", fields);
      return;
    }
    if (outcome.kind === "succeeded") {
      const refusal = await this.submitResult(attempt, outcome, fields);
      if (refusal === undefined) return;
      outcome = refusal;
    }
    await this.submitFailure(attempt, outcome, fields);
  }

  /** Submits the result; the failure to report instead when the job service refused it
   * outright (so that the job does not wait for its lease to run out). */
  private async submitResult(
    attempt: Attempt,
    result: Extract<Outcome, { kind: "succeeded" }>,
    fields: log.Fields,
  ): Promise<Failed | undefined> {
    try {
      const answer = await this.retrying(attempt, (timeoutMs) =>
        this.executor.submitResult(
          { jobId: attempt.jobId, leaseToken: attempt.leaseToken, output: result.output, outputHash: result.outputHash },
          { timeoutMs },
        ),
      );
      const answered = { ...fields, status: statusName(answer.status), output_hash: result.outputHash };
      if (answer.status === JobStatus.SUCCEEDED || answer.status === JobStatus.CANCELLED) {
        log.info("result submitted", answered);
      } else {
        // the job service refused the output (it breaks the type's output schema, say) and
        // ended the attempt itself: retried or failed, nothing of the output stored
        log.warn("result refused; the job service ended the attempt", answered);
      }
      return undefined;
    } catch (caught) {
      if (!refused("SubmitResult", caught, fields)) return undefined;
      // INVALID_ARGUMENT: the output breaks the type's declared output schema (the job
      // service checks it, as the Python worker checks it before submitting)
      const code = codeOf(caught) === Code.InvalidArgument ? "VALIDATION_OUTPUT_SCHEMA" : "INTERNAL_ERROR";
      return { kind: "failed", code, message: bounded(`the job service refused the result: ${log.described(caught)}`) };
    }
  }

  private async submitFailure(attempt: Attempt, failure: Failed, fields: log.Fields): Promise<void> {
    try {
      const answer = await this.retrying(attempt, (timeoutMs) =>
        this.executor.submitFailure(
          {
            jobId: attempt.jobId,
            leaseToken: attempt.leaseToken,
            errorCode: failure.code,
            errorMessage: failure.message,
            // whole milliseconds, as the Python worker rounds them
            retryAfterMs: BigInt(Math.round(failure.retryAfterMs ?? 0)),
            signalsSeen: BigInt(failure.signalsSeen ?? 0),
          },
          { timeoutMs },
        ),
      );
      const suspended = failure.retryAfterMs === undefined ? {} : { retry_after_ms: Math.round(failure.retryAfterMs) };
      log.info("failure submitted", { ...fields, error_code: failure.code, status: statusName(answer.status), ...suspended });
    } catch (caught) {
      refused("SubmitFailure", caught, fields);
    }
  }

  /** `call` again on transient failures, with backoff, until the attempt's submit deadline. */
  private async retrying<T>(attempt: Attempt, call: (timeoutMs: number) => Promise<T>): Promise<T> {
    const deadline = attempt.submitDeadline();
    let backoff = SUBMIT_BACKOFF_START_MS;
    for (;;) {
      const remaining = deadline - performance.now();
      try {
        // whole milliseconds: grpcio refuses a grpc-timeout with a fraction
        return await call(Math.min(SUBMIT_CALL_TIMEOUT_MS, Math.max(Math.ceil(remaining), MIN_CALL_TIMEOUT_MS)));
      } catch (caught) {
        if (!isTransient(caught) || performance.now() + backoff >= deadline) throw caught;
      }
      await pause(backoff);
      backoff = Math.min(backoff * 2, SUBMIT_BACKOFF_MAX_MS);
    }
  }
}

/** Logs a failed submit; true when the job service refused it outright (neither a lost
 * lease nor an outage). */
function refused(rpc: string, caught: unknown, fields: log.Fields): boolean {
  if (meansLeaseLost(caught)) {
    log.info(`${rpc} refused, the lease is lost; dropping the outcome`, fields);
    return false;
  }
  if (isTransient(caught)) {
    log.warn(`${rpc} kept failing until the lease ran out; the job service will settle the job`, {
      ...fields,
      error: log.described(caught),
    });
    return false;
  }
  log.error(`${rpc} refused`, { ...fields, error: log.described(caught) });
  return true;
}

function statusName(status: JobStatus): string {
  return JobStatusSchema.value[status]?.name ?? `JobStatus(${status})`;
}

/**
 * Durable steps of one attempt (issue 45, ADR 0013; worker_service/durable_steps.py, whose
 * rules these are): any side effect job code runs as `await context.step(name, fn)`
 * happens once per job, whatever crashes and retries come between.
 *
 *     recorded earlier at this position?
 *         same name:     resolve to its recorded result (or throw its recorded job
 *                        error); `fn` is not called
 *         another name:  the job's code asks for its steps in another order than when
 *                        they were recorded: the attempt fails NONDETERMINISTIC (class
 *                        JOB: never retried)
 *         no:            call `fn` (`context.stepKey` is the step's idempotency key, the
 *                        same on every attempt), record its JSON result
 *                        (ExecutorService.RecordStepResult) before the job goes on,
 *                        resolve to it
 *
 * A position is the step's ordinal: the how-manieth step of the run. The value returned is
 * the result as recorded (through JSON), so a first run and a replay see the same value.
 * A `JobError` that `fn` throws is recorded and thrown again on replay; any other error is
 * not recorded: the next attempt calls `fn` again, with the same key. The records are the
 * Python worker's (`LockedJob.step_results`), so either worker replays the other's.
 * Results are the job's data: never logged here.
 */
import type { JsonValue } from "@bufbuild/protobuf";

import type { LockedJob, StepResult } from "../gen/jobs/v1/executor_service_pb.js";
import { JobError } from "./job_type.js";
import * as log from "./log.js";
import { type Executor, isTransient, meansLeaseLost, pause } from "./rpc.js";

// shared/ai/steps.py STEP_NAME, shared/durable_steps.py MAX_ERROR_MESSAGE_CHARS
const STEP_NAME = /^[a-z][a-z0-9_]{0,63}$/;
const MAX_ERROR_MESSAGE_CHARS = 10_000;
// Recording a step's outcome retries transient failures this long at most (or the lease
// TTL, if shorter); then the attempt fails (retried) rather than go on unrecorded.
const RECORD_WINDOW_MS = 10_000;
const RECORD_CALL_TIMEOUT_MS = 5_000;
const RECORD_BACKOFF_START_MS = 50;
const RECORD_BACKOFF_MAX_MS = 1_000;
// Error codes of class SUSPENDED (shared/attempt_errors.py): a wait not over yet, which
// ends the attempt; the step runs again when the job wakes, so it is not recorded.
const SUSPENDED = /^SUSPENDED(_|$)/;

export type StepRecorder = Pick<Executor, "recordStepResult">;

/** What a step needs of its attempt: whether it may still make an effect. */
export interface StepGuard {
  /** Aborted once the attempt is stopped (its code may run on; its steps may not). */
  readonly signal: AbortSignal;
  /** Whether the lease has run out by this worker's clock. */
  leaseExpired(): boolean;
}

/** The lease ran out by this worker's clock before a step's function was called: another
 * attempt may own the job and have made the step. The attempt stops and reports nothing. */
export class LeaseExpired extends Error {
  constructor() {
    super("the lease ran out by this worker's clock: the step is not run");
    this.name = "LeaseExpired";
  }
}

/** The idempotency key of a job's step: the same on every attempt of the job. */
export function stepKey(jobId: string, ordinal: number, name: string): string {
  return `${jobId}/${ordinal}/${name}`;
}

export class DurableSteps {
  private readonly recorded: ReadonlyMap<number, StepResult>;
  private next = 0;
  /** The idempotency key of the step whose function runs now (undefined between steps). */
  key: string | undefined;

  constructor(
    private readonly job: LockedJob,
    private readonly recorder: StepRecorder | undefined,
    private readonly guard: StepGuard,
    private readonly now: () => number = performance.now.bind(performance),
  ) {
    this.recorded = new Map(job.stepResults.map((result) => [result.ordinal, result]));
  }

  async run(name: string, fn: () => unknown): Promise<JsonValue> {
    if (!STEP_NAME.test(name)) throw new RangeError(`a step's name is 1..64 of a-z, 0-9 and _ (got '${name}')`);
    if (this.key !== undefined) throw new Error("a step cannot run inside another one (or two at once)");
    const ordinal = this.next++;
    const recorded = this.recorded.get(ordinal);
    if (recorded !== undefined) return this.replayed(recorded, name);
    // A process paused past its lease (SIGSTOP, a long GC) resumes here: another attempt
    // may have made and recorded this step meanwhile. Checked right before the call, with
    // no await between; a stopped attempt's code may still be running, but makes no effect.
    this.guard.signal.throwIfAborted();
    if (this.guard.leaseExpired()) throw new LeaseExpired();
    this.key = stepKey(this.job.jobId, ordinal, name);
    let value: unknown;
    try {
      value = await fn();
    } catch (caught) {
      if (!(caught instanceof JobError) || SUSPENDED.test(caught.code)) throw caught;
      const message = caught.message.slice(0, MAX_ERROR_MESSAGE_CHARS);
      await this.record(ordinal, name, { case: "error", value: { code: caught.code, message } });
      throw caught;
    } finally {
      this.key = undefined;
    }
    const text = jsonText(value, name);
    const stored = await this.record(ordinal, name, { case: "resultJson", value: text });
    return stored !== undefined ? this.replayed(stored, name) : (JSON.parse(text) as JsonValue);
  }

  private replayed(recorded: StepResult, name: string): JsonValue {
    if (recorded.name !== name) {
      throw new JobError(
        "NONDETERMINISTIC",
        `step ${recorded.ordinal} is '${name}' in this run, but '${recorded.name}' was recorded there: ` +
          "steps must be asked for in the same order on every run",
      );
    }
    log.info("step returns what an earlier attempt recorded", {
      job_id: this.job.jobId,
      attempt: this.job.attempt,
      ordinal: recorded.ordinal,
      step: name,
      recorded_by: recorded.attempt,
    });
    const outcome = recorded.outcome?.outcome;
    if (outcome?.case === "resultJson") return JSON.parse(outcome.value) as JsonValue;
    throw new JobError(outcome?.value?.code || "INTERNAL_ERROR", outcome?.value?.message ?? "");
  }

  /** Records a step's outcome before the attempt goes on: undefined when this call
   * recorded it, else the outcome recorded at its ordinal earlier (which stands). Rejects
   * on a lost lease; an error that outlasts the window fails the attempt. */
  private async record(
    ordinal: number,
    name: string,
    outcome: { case: "resultJson"; value: string } | { case: "error"; value: { code: string; message: string } },
  ): Promise<StepResult | undefined> {
    const recorder = this.recorder;
    if (recorder === undefined) throw new JobError("INTERNAL_ERROR", "this worker cannot record steps");
    const { jobId, leaseToken } = this.job;
    const ttl = Number(this.job.leaseTtlMs);
    const deadline = this.now() + (ttl > 0 ? Math.min(RECORD_WINDOW_MS, ttl) : RECORD_WINDOW_MS);
    let backoff = RECORD_BACKOFF_START_MS;
    for (;;) {
      let answer;
      try {
        answer = await recorder.recordStepResult(
          { jobId, leaseToken, ordinal, name, outcome: { outcome } },
          { timeoutMs: RECORD_CALL_TIMEOUT_MS },
        );
      } catch (caught) {
        if (meansLeaseLost(caught) || !isTransient(caught) || this.now() + backoff >= deadline) throw caught;
      }
      if (answer?.recorded) return undefined;
      if (answer?.stored !== undefined) return answer.stored;
      // stored by a call of ours that timed out, not visible to this one yet
      if (answer !== undefined && this.now() + backoff >= deadline) {
        throw new JobError("INTERNAL_ERROR", `step ${ordinal}'s record did not show`);
      }
      await pause(backoff);
      backoff = Math.min(backoff * 2, RECORD_BACKOFF_MAX_MS);
    }
  }
}

/** The JSON text of a step's result (nothing: `null`); a JobError INTERNAL_ERROR for a
 * value JSON cannot hold (Python's `json.dumps(allow_nan=False)` refuses the same). */
function jsonText(value: unknown, name: string): string {
  try {
    return JSON.stringify(value === undefined ? null : value, (_key, item: unknown) => {
      if (typeof item === "number" && !Number.isFinite(item)) throw new TypeError(`${item} is not JSON`);
      if (typeof item === "function" || typeof item === "symbol") throw new TypeError(`a ${typeof item} is not JSON`);
      return item;
    });
  } catch (caught) {
    throw new JobError("INTERNAL_ERROR", `step ${name} returned a value JSON cannot hold: ${log.described(caught)}`);
  }
}

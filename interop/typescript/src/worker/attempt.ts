/**
 * One attempt of a locked job as it runs here: its lease (by the local clock), why it was
 * stopped if it was, the progress to report, the context its job code gets (durable steps
 * and waits among it), and the outcome it ends with. What each way of ending is called is
 * worker_service/domain/outcomes.py's: the job service decides what an outcome means
 * (retry, failure, cancellation, a suspension).
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

import type { LockedJob } from "../gen/jobs/v1/executor_service_pb.js";
import { outputHash } from "../output_hash.js";
import { DurableSteps, LeaseExpired, type StepRecorder } from "./durable_steps.js";
import { JobError, type JobContext, type JobType, type Recorded } from "./job_type.js";
import { meansLeaseLost } from "./rpc.js";
import { AttemptSignals, type SignalFetcher } from "./signals.js";
import { Suspension, Waits } from "./waits.js";

/** Used when the job service leaves the heartbeat interval unset. */
const DEFAULT_HEARTBEAT_INTERVAL_MS = 1_000;
// error_message is operator detail: bounded, so a runaway message cannot bloat the row
const MAX_ERROR_MESSAGE_CHARS = 4_000;

/** Why the worker stopped a running attempt. */
export type StopCause = "cancel_requested" | "lease_lost" | "shutdown" | "timeout";

export type Outcome =
  | { readonly kind: "succeeded"; readonly output: JsonObject; readonly outputHash: string }
  | {
      readonly kind: "failed";
      readonly code: string;
      readonly message: string;
      // a suspension's (SUSPENDED_*): when to run again, and the newest signal seq seen
      readonly retryAfterMs?: number;
      readonly signalsSeen?: number;
    }
  // another worker owns the job now: report nothing
  | { readonly kind: "lease_lost" };

// what a stopped attempt reports (a timeout's message names its limit)
const STOPPED: Record<Exclude<StopCause, "timeout">, Outcome> = {
  cancel_requested: { kind: "failed", code: "CANCELLED", message: "cancelled while running" },
  shutdown: { kind: "failed", code: "WORKER_SHUTDOWN", message: "handed back by a draining worker" },
  lease_lost: { kind: "lease_lost" },
};

/** What an attempt calls besides its job code: the rate limit, and the job service for its
 * durable steps and signals (undefined: job code asking for either fails the attempt). */
export interface AttemptServices {
  acquireCallPermit(tier: string): Promise<void>;
  readonly executor?: StepRecorder & SignalFetcher;
}

export class Attempt {
  readonly jobId: string;
  readonly leaseToken: string;
  readonly heartbeatIntervalMs: number;
  private readonly leaseTtlMs: number;
  /** The lease's end by the local monotonic clock: never later than the job service's. */
  private leaseDeadline: number;
  private readonly stop = new AbortController();
  cause: StopCause | undefined;
  private progress = -1;

  constructor(
    readonly job: LockedJob,
    private readonly now: () => number = performance.now.bind(performance),
  ) {
    this.jobId = job.jobId;
    this.leaseToken = job.leaseToken;
    this.leaseTtlMs = Number(job.leaseTtlMs);
    this.leaseDeadline = this.now() + this.leaseTtlMs;
    const asked = Number(job.heartbeatIntervalMs) || DEFAULT_HEARTBEAT_INTERVAL_MS;
    // a third of the TTL at most: a misconfigured interval must not let every lease lapse
    this.heartbeatIntervalMs = this.leaseTtlMs > 0 ? Math.min(asked, this.leaseTtlMs / 3) : asked;
  }

  get signal(): AbortSignal {
    return this.stop.signal;
  }

  /** Stops the attempt for `cause` (the first cause wins); false if it was stopped already. */
  cancel(cause: StopCause): boolean {
    if (this.cause !== undefined) return false;
    this.cause = cause;
    this.stop.abort(new Error(`attempt stopped: ${cause}`));
    return true;
  }

  setProgress(fraction: number): void {
    this.progress = Math.min(1, Math.max(0, fraction));
  }

  /** The progress not yet reported (-1: none), handed to the next heartbeat. */
  takeProgress(): number {
    const progress = this.progress;
    this.progress = -1;
    return progress;
  }

  /** A heartbeat that carried `progress` failed: sent with the next one, unless newer. */
  restoreProgress(progress: number): void {
    if (progress >= 0 && this.progress < 0) this.progress = progress;
  }

  /** A heartbeat sent at `sentAt` was answered: the lease runs a TTL from then at least. */
  extendLease(sentAt: number): void {
    this.leaseDeadline = Math.max(this.leaseDeadline, sentAt + this.leaseTtlMs);
  }

  leaseExpired(): boolean {
    return this.leaseTtlMs > 0 && this.now() >= this.leaseDeadline;
  }

  /** How long a submit may keep retrying: until the lease ends, two seconds at least. */
  submitDeadline(): number {
    return Math.max(this.leaseDeadline, this.now() + 2_000);
  }

  /** Runs `type`'s code on the job's input within `timeoutMs`: the outcome to report. An
   * attempt stopped meanwhile ends at once, whether or not the job code noticed. */
  async execute(type: JobType, services: AttemptServices): Promise<Outcome> {
    const timeoutMs = (type.spec.timeoutSeconds ?? 60) * 1000;
    const timer = setTimeout(() => this.cancel("timeout"), timeoutMs);
    const stopped = new Promise<void>((resolve) => {
      this.signal.addEventListener("abort", () => resolve(), { once: true });
    });
    try {
      const running = type.run(this.job.input ?? {}, this.context(services));
      running.catch(() => undefined); // its rejection after a stop is no one's to read
      const output = await Promise.race([running, stopped]);
      if (this.cause !== undefined || output === undefined) return this.stoppedOutcome(timeoutMs);
      return { kind: "succeeded", output, outputHash: outputHash(output) };
    } catch (caught) {
      if (this.cause !== undefined) return this.stoppedOutcome(timeoutMs);
      return failureFor(caught);
    } finally {
      clearTimeout(timer);
    }
  }

  /** What job code gets: the attempt, and its durable steps and waits, whose lost lease
   * stops the attempt (it then reports nothing). */
  private context(services: AttemptServices): JobContext {
    const steps = new DurableSteps(this.job, services.executor, this, this.now);
    let inbox: AttemptSignals | undefined;
    const signals = (): AttemptSignals => {
      if (services.executor === undefined) throw new JobError("INTERNAL_ERROR", "this worker cannot fetch signals");
      return (inbox ??= new AttemptSignals(services.executor, { jobId: this.jobId, leaseToken: this.leaseToken }));
    };
    const waits = new Waits(steps, signals);
    const guarded = async <T>(call: () => Promise<T>): Promise<T> => {
      try {
        return await call();
      } catch (caught) {
        if (caught instanceof LeaseExpired || meansLeaseLost(caught)) this.cancel("lease_lost");
        throw caught;
      }
    };
    return {
      jobId: this.jobId,
      attempt: this.job.attempt,
      signal: this.signal,
      progress: (fraction) => this.setProgress(fraction),
      acquireCallPermit: (tier) => services.acquireCallPermit(tier),
      step<T extends JsonValue | void>(name: string, fn: () => T | Promise<T>): Promise<Recorded<T>> {
        return guarded(() => steps.run(name, fn)) as Promise<Recorded<T>>;
      },
      get stepKey(): string {
        if (steps.key === undefined) throw new Error("context.stepKey is the key of the step running now: there is none");
        return steps.key;
      },
      sleep: async (ms) => {
        if (!(ms >= 0)) throw new RangeError(`a sleep lasts 0 ms or more (got ${ms})`);
        return guarded(() => waits.sleepUntil(Date.now() + ms));
      },
      sleepUntil: async (when) => {
        const ms = when instanceof Date ? when.getTime() : when;
        if (!Number.isFinite(ms)) throw new RangeError(`sleepUntil needs a valid time (got ${String(when)})`);
        return guarded(() => waits.sleepUntil(ms));
      },
      waitForSignal: (name, timeoutMs) => guarded(() => waits.waitForSignal(name, timeoutMs)),
    };
  }

  private stoppedOutcome(timeoutMs: number): Outcome {
    const cause = this.cause ?? "lease_lost";
    if (cause === "timeout") return { kind: "failed", code: "TIMEOUT", message: `no result within ${timeoutMs / 1000}s` };
    return STOPPED[cause];
  }
}

/** The failure an error thrown by job code stands for. */
export function failureFor(caught: unknown): Outcome {
  if (caught instanceof Suspension) {
    const { code, message, retryAfterMs, signalsSeen } = caught;
    return { kind: "failed", code, message: bounded(message), retryAfterMs, signalsSeen };
  }
  if (caught instanceof JobError) return { kind: "failed", code: caught.code, message: bounded(caught.message) };
  const message = caught instanceof Error ? `${caught.name}: ${caught.message}` : String(caught);
  return { kind: "failed", code: "INTERNAL_ERROR", message: bounded(message) };
}

export function bounded(message: string): string {
  return message.length <= MAX_ERROR_MESSAGE_CHARS ? message : `${message.slice(0, MAX_ERROR_MESSAGE_CHARS - 1)}…`;
}

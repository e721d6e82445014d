/**
 * What a job type written in TypeScript is: its spec (data the worker declares, the job
 * service stores and checks jobs against: it runs no job type code) and the code that runs
 * one attempt on this worker.
 */
import type { JsonObject, JsonValue, MessageInitShape } from "@bufbuild/protobuf";

import type { JobTypeSpecSchema } from "../gen/jobs/v1/job_type_pb.js";
import { canonicalJson } from "../output_hash.js";

export type JobTypeSpecInit = MessageInitShape<typeof JobTypeSpecSchema>;

// the dialect a spec's schemas are written in (what the job service validates with)
export const JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";

/** What job code gets besides its input: the attempt, and the means to end it well. */
export interface JobContext {
  readonly jobId: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** Aborted when the attempt must stop: a cancel, a lost lease, the worker shutting down,
   * the spec's timeout. Job code passes it on to what it waits for. */
  readonly signal: AbortSignal;
  /** Progress 0..1, sent with the next heartbeat. */
  progress(fraction: number): void;
  /** Resolves when a provider call for `modelTier` may be made now (the fleet-wide rate
   * limit, ExecutorService.AcquireCallPermit): call it right before each provider call. */
  acquireCallPermit(modelTier: string): Promise<void>;
  /** Runs `fn` as the job's next durable step, once per job (`durable_steps.ts`): its
   * JSON result is recorded before this resolves, and every later attempt gets the
   * recorded result back without calling `fn` (a `JobError` it threw is recorded and
   * thrown again; any other error is not recorded: the next attempt calls `fn` again).
   * Steps are numbered in the order the code asks for them: asking for another step at a
   * position than was recorded there fails the job `NONDETERMINISTIC`. Resolves to the
   * result as recorded (through JSON: a function returning nothing gives `null`). */
  step<T extends JsonValue | void>(name: string, fn: () => T | Promise<T>): Promise<Recorded<T>>;
  /** The idempotency key of the step whose function runs now, `<job id>/<ordinal>/<name>`:
   * the same on every attempt; pass it to the system the effect is made in. Throws
   * outside a step. */
  readonly stepKey: string;
  /** A durable sleep (`waits.ts`): the attempt ends without a failure (its slot and lease
   * freed: `SUSPENDED_SLEEP`) and the job runs again from the top `ms` after the first
   * run's call, its recorded steps returned as recorded. A sleep is a step (`sleep`): keep
   * the order of steps and sleeps the same on every run. */
  sleep(ms: number): Promise<void>;
  /** `sleep` until `when` (a Date, or milliseconds since the epoch). */
  sleepUntil(when: Date | number): Promise<void>;
  /** A durable wait for the next signal named `name` (JobService.SendSignal; each once, in
   * send order): its payload, or null once `timeoutMs` from the first run's call have
   * passed without one. A signal already there resolves at once; otherwise the attempt
   * ends as `sleep`'s does (`SUSPENDED_SIGNAL`) and the signal, or the timeout, wakes the
   * job. Two steps (`signal_wait`, `signal`). */
  waitForSignal(name: string, timeoutMs: number): Promise<JsonObject | null>;
}

/** What `step` resolves to: the function's result as JSON holds it (nothing is `null`). */
export type Recorded<T> = T extends void ? null : T;

export interface JobType {
  readonly spec: JobTypeSpecInit;
  /** The attempt's output (a JSON object); throw a JobError to fail it with a code. */
  run(input: JsonObject, context: JobContext): Promise<JsonObject>;
}

/** An attempt's failure with an error code whose prefix names its class (JOB_: never
 * retried, PROVIDER_: retried with backoff, ...; shared/errors.py ErrorClass). */
export class JobError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "JobError";
  }
}

/** A schema as the spec carries it: one text per schema (sorted keys, no whitespace), so
 * that declaring the same type again is the same spec, never a conflict. */
export function schemaJson(schema: JsonObject): string {
  return canonicalJson({ $schema: JSON_SCHEMA_DIALECT, ...schema });
}

/** "job_type@version", as LockJobs' runnable_definitions name a definition. */
export function definitionName(spec: JobTypeSpecInit): string {
  return `${spec.jobType}@${spec.version}`;
}

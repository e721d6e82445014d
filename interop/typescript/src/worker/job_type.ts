/**
 * What a job type written in TypeScript is: its spec (data the worker declares, the job
 * service stores and checks jobs against: it runs no job type code) and the code that runs
 * one attempt on this worker.
 */
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";

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
}

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

/**
 * The worker's job types, declared to the job service as data (ExecutorService.
 * DeclareJobType) after its session opens and before it takes a lease. A spec the job
 * service refuses — another spec stored for the same (type, version): FAILED_PRECONDITION,
 * naming each field that differs; or a malformed one: INVALID_ARGUMENT — is logged, and
 * nothing of that type runs here.
 */
import { Code, ConnectError } from "@connectrpc/connect";

import { BadRequestSchema, PreconditionFailureSchema } from "../gen/google/rpc/error_details_pb.js";
import type { JobType } from "./job_type.js";
import * as log from "./log.js";
import { CALL_TIMEOUT_MS, type Executor, isTransient, pause } from "./rpc.js";

const RETRY_START_MS = 100;
const RETRY_MAX_MS = 2_000;

/** The types the job service accepted, by name. Transient failures are retried until
 * `deadlineMs` (Date.now()), then the type counts as refused. */
export async function declareJobTypes(
  executor: Executor,
  workerId: string,
  types: readonly JobType[],
  deadlineMs: number,
): Promise<Map<string, JobType>> {
  const declared = new Map<string, JobType>();
  for (const type of types) {
    const fields = { job_type: type.spec.jobType, version: type.spec.version, worker_id: workerId };
    try {
      const answer = await declareOne(executor, workerId, type, deadlineMs);
      declared.set(type.spec.jobType!, type);
      log.info("job type declared", { ...fields, first_declared_by: answer.firstDeclaredBy });
    } catch (caught) {
      log.error("job type refused: nothing of it runs here", { ...fields, ...refusal(caught) });
    }
  }
  return declared;
}

async function declareOne(executor: Executor, workerId: string, type: JobType, deadlineMs: number) {
  let backoff = RETRY_START_MS;
  for (;;) {
    try {
      return await executor.declareJobType({ workerId, spec: type.spec }, { timeoutMs: CALL_TIMEOUT_MS });
    } catch (caught) {
      if (!isTransient(caught) || Date.now() + backoff >= deadlineMs) throw caught;
    }
    await pause(backoff);
    backoff = Math.min(backoff * 2, RETRY_MAX_MS);
  }
}

/** What a refusal says, for the log: its code, message and the fields it names. */
function refusal(caught: unknown): log.Fields {
  if (!(caught instanceof ConnectError)) return { error: log.described(caught) };
  const differing = caught
    .findDetails(PreconditionFailureSchema)
    .flatMap((failure) => failure.violations)
    .map(({ subject, description }) => ({ subject, description }));
  const bad = caught
    .findDetails(BadRequestSchema)
    .flatMap((request) => request.fieldViolations)
    .map(({ field, description }) => ({ field, description }));
  return {
    code: Code[caught.code],
    error: caught.rawMessage,
    ...(differing.length > 0 ? { differing_fields: differing } : {}),
    ...(bad.length > 0 ? { field_violations: bad } : {}),
  };
}

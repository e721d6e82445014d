/**
 * A second language proves the contract (issue 26): a TypeScript client generated from
 * proto/ (protobuf-es messages, Connect's gRPC transport over HTTP/2) against a running
 * job_service, e.g. `make run`'s.
 *
 * Creates a synthetic job, watches it to SUCCEEDED and checks its output against its
 * output_hash (RFC 8785, computed here), then makes three bad calls and reads the
 * google.rpc.ErrorInfo (domain, and the reason: a jobs.v1.ErrorReason's name without its
 * prefix) and google.rpc.BadRequest that grpc-status-details-bin carries. Prints one JSON line per step ({"step": ..., "ok": true, ...}); on the first
 * mismatch prints {"step": ..., "ok": false, "error": ...} and exits 1.
 *
 * Environment: JOBS_JOB_SERVICE_TARGET (host:port, default 127.0.0.1:50051; plaintext),
 * JOBS_AUTH_TOKEN_FILE (a client token, e.g. .jobs-data/client.token) or JOBS_AUTH_TOKEN,
 * JOBS_INTEROP_USER_ID (default "interop-typescript").
 */
import { readFileSync } from "node:fs";

import type { JsonObject } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createClient,
  type Client,
  type Interceptor,
} from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { ErrorReason, ErrorReasonSchema } from "./gen/jobs/v1/errors_pb.js";
import { type Job, JobStatus, JobStatusSchema } from "./gen/jobs/v1/job_pb.js";
import { JobService } from "./gen/jobs/v1/job_service_pb.js";
import { outputHash, SCHEME, VECTOR } from "./output_hash.js";

// ErrorInfo.domain: the full name of the service called (docs/api.md "The API")
const DOMAIN = JobService.typeName;
const WATCH_TIMEOUT_MS = 60_000;
const FINISHED = new Set([JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED]);

let step = "config";

function emit(fields: Record<string, unknown>): void {
  console.log(JSON.stringify({ step, ok: true, ...fields }));
}

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

function statusName(status: JobStatus): string {
  return JobStatusSchema.value[status]?.name ?? `JobStatus(${status})`;
}

function bearer(token: string): Interceptor {
  return (next) => (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
}

function jobService(baseUrl: string, token: string): Client<typeof JobService> {
  return createClient(JobService, createGrpcTransport({ baseUrl, interceptors: [bearer(token)] }));
}

/** ErrorInfo.reason of a jobs.v1.ErrorReason: its name without the ERROR_REASON_ prefix. */
function reasonString(reason: ErrorReason): string {
  return (ErrorReasonSchema.value[reason]?.name ?? "").replace(/^ERROR_REASON_/, "");
}

/** The error `call` must end with (a success is a mismatch), with its single ErrorInfo. */
async function refused(call: () => Promise<unknown>, code: Code, expected: ErrorReason) {
  const reason = reasonString(expected);
  let error: ConnectError | undefined;
  try {
    await call();
  } catch (caught) {
    error = ConnectError.from(caught);
  }
  check(error !== undefined, `the call succeeded; expected ${Code[code]} ${reason}`);
  check(error.code === code, `code ${Code[error.code]}, expected ${Code[code]}: ${error.message}`);
  const infos = error.findDetails(ErrorInfoSchema);
  check(infos.length === 1, `${infos.length} ErrorInfo in grpc-status-details-bin, expected 1`);
  const info = infos[0]!;
  check(info.reason === reason, `reason ${info.reason}, expected ${reason}`);
  check(info.domain === DOMAIN, `domain ${info.domain}, expected ${DOMAIN}`);
  return { error, info };
}

async function main(): Promise<void> {
  const target = process.env.JOBS_JOB_SERVICE_TARGET || "127.0.0.1:50051";
  const tokenFile = process.env.JOBS_AUTH_TOKEN_FILE;
  const token = tokenFile ? readFileSync(tokenFile, "utf8").trim() : process.env.JOBS_AUTH_TOKEN;
  check(!!token, "set JOBS_AUTH_TOKEN_FILE (e.g. .jobs-data/client.token) or JOBS_AUTH_TOKEN");
  const baseUrl = target.includes("://") ? target : `http://${target}`;
  const userId = process.env.JOBS_INTEROP_USER_ID || "interop-typescript";
  const jobs = jobService(baseUrl, token);

  step = "create";
  const input: JsonObject = { sleep_ms: 200 };
  const created = await jobs.createJob({ userId, jobType: "synthetic", input });
  const jobId = created.job?.id ?? "";
  check(jobId !== "", "CreateJob answered no job id");
  emit({ job_id: jobId, status: statusName(created.job!.status) });

  step = "watch";
  let last: Job | undefined;
  // The current state first, then each change, and the server ends the stream after a final
  // state: read to its end (a stream that never ends fails with DEADLINE_EXCEEDED). With a
  // `break` instead, node (connect-node 2.1.2) stayed up until the deadline had passed.
  for await (const change of jobs.watchJob({ jobId, userId }, { timeoutMs: WATCH_TIMEOUT_MS })) {
    if (change.job === undefined) continue; // partial output (not asked for)
    check(last === undefined || !FINISHED.has(last.status), "WatchJob went on after a final state");
    last = change.job;
    emit({ job_id: last.id, status: statusName(last.status) });
  }
  check(last !== undefined, "WatchJob ended without a state");
  check(last.id === jobId, `WatchJob sent job ${last.id}, expected ${jobId}`);
  check(last.status === JobStatus.SUCCEEDED, `job ended ${statusName(last.status)}`);

  step = "succeeded";
  const output = last.output;
  check(output !== undefined && Object.keys(output).length > 0, "no output");
  check(last.outputHash.startsWith(SCHEME), `output_hash ${JSON.stringify(last.outputHash)}`);
  check(outputHash(VECTOR.value) === VECTOR.hash, "the RFC 8785 vector does not hash as docs/api.md says");
  const computed = outputHash(output);
  check(computed === last.outputHash, `output_hash ${last.outputHash}, computed ${computed}`);
  emit({ job_id: jobId, status: statusName(last.status), output, output_hash: last.outputHash });

  step = "unknown_job_type";
  const unknown = await refused(
    () => jobs.createJob({ userId, jobType: "no_such_job_type", input }),
    Code.NotFound, // no worker declared it
    ErrorReason.UNKNOWN_JOB_TYPE,
  );
  emit({ code: Code[unknown.error.code], reason: unknown.info.reason, domain: unknown.info.domain });

  step = "invalid_input";
  const invalid = await refused(
    () => jobs.createJob({ userId, jobType: "synthetic", input: { sleep_ms: -1 } }),
    Code.InvalidArgument,
    ErrorReason.INVALID_INPUT,
  );
  const violations = invalid.error
    .findDetails(BadRequestSchema)
    .flatMap((badRequest) => badRequest.fieldViolations)
    .map(({ field, description }) => ({ field, description }));
  check(
    violations.some((violation) => violation.field === "input.sleep_ms"),
    `BadRequest names no input.sleep_ms: ${JSON.stringify(violations)}`,
  );
  emit({
    code: Code[invalid.error.code],
    reason: invalid.info.reason,
    domain: invalid.info.domain,
    metadata: invalid.info.metadata,
    field_violations: violations,
  });

  step = "unauthenticated";
  const stranger = jobService(baseUrl, "not-a-token");
  const denied = await refused(
    () => stranger.createJob({ userId, jobType: "synthetic", input }),
    Code.Unauthenticated,
    ErrorReason.UNAUTHENTICATED,
  );
  emit({ code: Code[denied.error.code], reason: denied.info.reason, domain: denied.info.domain });

  step = "done";
  emit({ job_id: jobId });
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  console.log(JSON.stringify({ step, ok: false, error: message }));
  process.exitCode = 1;
});

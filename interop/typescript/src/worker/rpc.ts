/**
 * The job service as the worker calls it: ExecutorService over Connect's gRPC transport
 * (HTTP/2 to the Python grpcio server), with the worker's bearer token, and the few ways a
 * call can fail that the worker tells apart (as worker_service/domain/errors.py does).
 */
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { ExecutorService } from "../gen/jobs/v1/executor_service_pb.js";

export type Executor = Client<typeof ExecutorService>;

/** A unary call's deadline unless the caller has a tighter one. */
export const CALL_TIMEOUT_MS = 5_000;

export function executorClient(baseUrl: string, token: string): Executor {
  const bearer: Interceptor = (next) => (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
  return createClient(ExecutorService, createGrpcTransport({ baseUrl, interceptors: [bearer] }));
}

/** The ErrorInfo reason of a refused call ("LEASE_LOST", ...), or "" when it has none. */
export function reasonOf(caught: unknown): string {
  if (!(caught instanceof ConnectError)) return "";
  return caught.findDetails(ErrorInfoSchema)[0]?.reason ?? "";
}

export function codeOf(caught: unknown): Code | undefined {
  return caught instanceof ConnectError ? caught.code : undefined;
}

/** The same call may succeed if simply tried again: the job service was not reached, or
 * said it cannot serve right now. */
export function isTransient(caught: unknown): boolean {
  const code = codeOf(caught);
  if (code === undefined) return false;
  return (
    code === Code.Unavailable ||
    code === Code.DeadlineExceeded ||
    reasonOf(caught) === "PLATFORM_UNAVAILABLE"
  );
}

/** The attempt is no longer this worker's: stop, and report nothing. */
export function meansLeaseLost(caught: unknown): boolean {
  const reason = reasonOf(caught);
  return reason === "LEASE_LOST" || reason === "JOB_NOT_FOUND";
}

/** Waits `ms`, or less when `signal` aborts first (never rejects). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

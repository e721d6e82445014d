/**
 * The heartbeat of one running attempt (worker_service/heartbeat.py): keeps its lease
 * alive, reports progress, and stops the attempt when the job service says so (a cancel
 * was asked for, or the lease is lost). The first beat goes out one interval after the
 * start, so a job shorter than that costs no call. Transient failures are retried at the
 * next beat until the lease has run out by the local clock: by then the job service has
 * handed the job to another worker, so the attempt stops.
 */
import type { Attempt } from "./attempt.js";
import * as log from "./log.js";
import { type Executor, isTransient, meansLeaseLost, pause } from "./rpc.js";

// A heartbeat call may take this long at least, however close the lease's end is. (Every
// deadline is whole milliseconds: grpcio refuses a grpc-timeout with a fraction.)
const MIN_CALL_TIMEOUT_MS = 200;

/** Beats until `attempt` is stopped or `done` aborts (the attempt finished). */
export async function heartbeat(executor: Executor, attempt: Attempt, done: AbortSignal): Promise<void> {
  const interval = attempt.heartbeatIntervalMs;
  const fields = { job_id: attempt.jobId, attempt: attempt.job.attempt };
  for (;;) {
    await pause(interval, done);
    if (done.aborted || attempt.cause !== undefined) return;
    if (attempt.leaseExpired()) {
      log.warn("the lease ran out without a heartbeat getting through; stopping", fields);
      attempt.cancel("lease_lost");
      return;
    }
    const sentAt = performance.now();
    const progress = attempt.takeProgress();
    try {
      const reply = await executor.heartbeat(
        { jobId: attempt.jobId, leaseToken: attempt.leaseToken, progress },
        { timeoutMs: Math.max(MIN_CALL_TIMEOUT_MS, Math.ceil(interval)), signal: done },
      );
      attempt.extendLease(sentAt);
      if (reply.cancelRequested) {
        log.info("cancel requested; stopping", fields);
        attempt.cancel("cancel_requested");
        return;
      }
    } catch (caught) {
      if (done.aborted) return;
      attempt.restoreProgress(progress);
      if (meansLeaseLost(caught)) {
        log.info("lease lost; stopping without reporting", fields);
        attempt.cancel("lease_lost");
        return;
      }
      if (!isTransient(caught)) log.warn("heartbeat failed; will retry", { ...fields, error: log.described(caught) });
    }
  }
}

/**
 * One queue's intake (worker_service/intake.py): work tokens fetched from JetStream, each
 * answered by a LockJobs call with `queue` set, then run in this worker's slots. A token
 * is never a decision: the job service grants the queue's best eligible jobs, up to one per
 * token — not necessarily the jobs the messages name — and only jobs of the definitions
 * this worker runs. Every message is settled on its answer at once (acked when used or
 * dropped, handed back with the delay the answer names), so JetStream redelivery never acts
 * as a retry: only the job service retries, with a new token.
 */
import type { JsMsg } from "nats";

import { LockOutcome, type LockJobResponse } from "../gen/jobs/v1/executor_service_pb.js";
import { type DispatchSource, parseDispatch } from "./dispatch.js";
import * as log from "./log.js";
import type { Pipeline } from "./pipeline.js";
import { type Executor, isTransient, pause } from "./rpc.js";

const LOCK_TIMEOUT_MS = 5_000;
// Redelivery delays for a token whose lock failed: an outage, or a refusal (a bug).
const UNREACHABLE_NAK_DELAY_MS = 1_000;
const REFUSED_NAK_DELAY_MS = 5_000;
// A NOT_DUE token is offered again no sooner than this.
const MIN_NAK_DELAY_MS = 50;
const FETCH_RETRY_MS = 500;

export class QueueIntake {
  private free: number;
  private readonly stopping = new AbortController();
  private wake: (() => void) | undefined;
  /** Every message's handling, from its arrival to its job's reported outcome. */
  readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly source: DispatchSource,
    readonly slots: number,
    private readonly executor: Executor,
    private readonly pipeline: Pipeline,
    private readonly workerId: string,
    private readonly runnable: readonly string[],
    private readonly fetchTimeoutMs: number,
  ) {
    this.free = slots;
  }

  get queue(): string {
    return this.source.queue;
  }

  /** Fetches and runs until stopped; the messages of the fetch in progress are handed back. */
  async run(): Promise<void> {
    const stop = this.stopping.signal;
    while (!stop.aborted) {
      if (this.free <= 0) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        continue;
      }
      try {
        await this.source.fetch(this.free, this.fetchTimeoutMs, (message) => this.take(message), stop);
      } catch (caught) {
        if (stop.aborted) break;
        log.warn("cannot fetch dispatch messages", { queue: this.queue, error: log.described(caught) });
        await pause(FETCH_RETRY_MS, stop);
      }
    }
  }

  /** Stops fetching; jobs already taken run to completion. Idempotent. */
  stop(): void {
    this.stopping.abort();
    this.wake?.();
  }

  private take(message: JsMsg): void {
    if (this.stopping.signal.aborted) {
      message.nak(); // to another worker, at once
      return;
    }
    const dispatch = parseDispatch(message.data);
    if (dispatch === undefined) {
      log.warn("dropping a malformed dispatch message", { queue: this.queue });
      message.ack();
      return;
    }
    this.free -= 1;
    const handling = this.handle(message, dispatch.jobId).finally(() => {
      this.inFlight.delete(handling);
      this.free += 1;
      const wake = this.wake;
      this.wake = undefined;
      wake?.();
    });
    this.inFlight.add(handling);
  }

  private async handle(message: JsMsg, jobId: string): Promise<void> {
    let answer: LockJobResponse | undefined;
    try {
      const locked = await this.executor.lockJobs(
        { queue: this.queue, requests: [{ jobId, workerId: this.workerId }], runnableDefinitions: [...this.runnable] },
        { timeoutMs: LOCK_TIMEOUT_MS },
      );
      answer = locked.responses[0];
      if (answer === undefined) throw new Error("LockJobs answered no response");
    } catch (caught) {
      const transient = isTransient(caught);
      if (!transient) log.error("LockJobs failed; token handed back", { queue: this.queue, error: log.described(caught) });
      message.nak(transient ? UNREACHABLE_NAK_DELAY_MS : REFUSED_NAK_DELAY_MS);
      return;
    }
    if (answer.outcome === LockOutcome.LOCKED && answer.job !== undefined) {
      message.ack();
      await this.pipeline.run(answer.job);
    } else if (answer.outcome === LockOutcome.NOT_DUE) {
      const at = answer.retryAfter;
      const due = at === undefined ? 0 : Number(at.seconds) * 1000 + at.nanos / 1e6 - Date.now();
      message.nak(Math.max(MIN_NAK_DELAY_MS, Math.round(due)));
    } else {
      // nothing grantable now (finished, cancelled, running elsewhere, a duplicate): drop it
      message.ack();
    }
  }
}

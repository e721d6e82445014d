/**
 * The worker's session with the job service (ExecutorService.WorkerSession), as
 * worker_service/session.py holds it: one stream for the process's whole life, opened again
 * at once when it breaks, pinged every interval the job service asks for, ended with a
 * goodbye on a clean shutdown. Every session names this process by its incarnation, drawn
 * once at random: a session of another incarnation under the same worker id tells the job
 * service this process is gone (its leases end at once), while this process reopening its
 * own session after an interruption ends nothing. So no lease may be taken before the first
 * session is open (`registered`).
 */
import { randomUUID } from "node:crypto";

import type { MessageInitShape } from "@bufbuild/protobuf";

import {
  type WorkerSessionRequestSchema,
  type WorkerSessionResponse,
} from "../gen/jobs/v1/executor_service_pb.js";
import * as log from "./log.js";
import { Outbox } from "./outbox.js";
import { type Executor, isTransient, pause } from "./rpc.js";

// Between two attempts to open the session (the last one repeats): short, since the job
// service waits well under a second for it, and bounded so a refusing server is not hammered.
const RECONNECT_DELAYS_MS = [0, 20, 50, 100, 200];
// How long the job service gets to answer a goodbye.
const GOODBYE_TIMEOUT_MS = 2_000;
// Never ping more often than this, whatever the job service asks.
const MIN_PING_INTERVAL_MS = 50;

type Request = MessageInitShape<typeof WorkerSessionRequestSchema>;

export class WorkerSession {
  /** This process: random, never reused. */
  readonly incarnation = randomUUID().replaceAll("-", "");
  sessionId = "";
  /** Resolved once the first session is registered: leases may be taken from then on. */
  readonly registered: Promise<void>;
  private markRegistered!: () => void;
  private readonly goodbye = new AbortController();
  private running: Promise<void> | undefined;

  constructor(
    private readonly executor: Executor,
    private readonly workerId: string,
  ) {
    this.registered = new Promise((resolve) => {
      this.markRegistered = resolve;
    });
  }

  start(): void {
    this.running ??= this.run();
  }

  /** Says goodbye (when a session is open) and waits until the session ended. Idempotent. */
  async close(): Promise<void> {
    this.goodbye.abort();
    await this.running;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.goodbye.signal.aborted) {
      try {
        await this.hold();
        return; // said goodbye
      } catch (caught) {
        const hadSession = this.sessionId !== "";
        this.sessionId = "";
        failures = hadSession ? 0 : failures + 1;
        if (hadSession || !isTransient(caught)) {
          log.info("session ended; reopening", { worker_id: this.workerId, error: log.described(caught) });
        }
      }
      const delay = RECONNECT_DELAYS_MS[Math.min(failures, RECONNECT_DELAYS_MS.length - 1)]!;
      await pause(delay, this.goodbye.signal);
    }
  }

  /** One session: hello, a ping every interval, a goodbye once asked; throws if the
   * stream ends before that. */
  private async hold(): Promise<void> {
    const outbox = new Outbox<Request>();
    const cut = new AbortController();
    outbox.push({ workerId: this.workerId, incarnation: this.incarnation });
    const answers = this.executor.workerSession(outbox, { signal: cut.signal })[Symbol.asyncIterator]();
    try {
      const first = await answers.next();
      if (first.done) throw new Error("the job service ended the session at once");
      this.opened(first.value);
      const interval = Math.max(MIN_PING_INTERVAL_MS, Number(first.value.pingIntervalMs));
      let answer = answers.next();
      const leaving = new Promise<"goodbye">((resolve) => {
        if (this.goodbye.signal.aborted) resolve("goodbye");
        this.goodbye.signal.addEventListener("abort", () => resolve("goodbye"), { once: true });
      });
      for (;;) {
        let timer: NodeJS.Timeout | undefined;
        const tick = new Promise<"ping">((resolve) => {
          timer = setTimeout(() => resolve("ping"), interval);
        });
        const next = await Promise.race([answer, leaving, tick]);
        clearTimeout(timer);
        if (next === "goodbye") break;
        if (next === "ping") {
          outbox.push({}); // a ping: data both ways
          continue;
        }
        if (next.done || next.value.closed) throw new Error("the job service ended the session");
        answer = answers.next(); // a pong
      }
      outbox.push({ goodbye: true });
      outbox.end();
      await Promise.race([untilClosed(answer, answers), pause(GOODBYE_TIMEOUT_MS)]);
      log.info("session closed", { worker_id: this.workerId, session_id: this.sessionId });
    } finally {
      outbox.end();
      cut.abort();
    }
  }

  private opened(first: WorkerSessionResponse): void {
    this.sessionId = first.sessionId;
    this.markRegistered();
    log.info("session open", {
      worker_id: this.workerId,
      session_id: first.sessionId,
      incarnation: this.incarnation,
      ping_interval_ms: Number(first.pingIntervalMs),
    });
  }
}

/** Reads answers until `closed` or the stream's end; never rejects. */
async function untilClosed(
  pending: Promise<IteratorResult<WorkerSessionResponse>>,
  answers: AsyncIterator<WorkerSessionResponse>,
): Promise<void> {
  try {
    for (let next = await pending; !next.done && !next.value.closed; next = await answers.next()) {
      // a pong still in flight
    }
  } catch {
    // the stream failed after the goodbye: nothing left to end
  }
}

/**
 * Durable sleeps and signal waits of one attempt (issue 45, ADR 0013;
 * worker_service/waits.py, whose records these are): a job that waits costs a row, not a
 * worker slot.
 *
 *     sleep(ms) / sleepUntil(t)          step `sleep` records the wake time on the first
 *                                        run; while it is ahead, the attempt ends
 *                                        SUSPENDED_SLEEP (handed back, not a failure) and
 *                                        the job runs again from the top at that time, its
 *                                        recorded steps returned as recorded
 *     waitForSignal(name, timeoutMs)     step `signal_wait` records the timeout's time;
 *                                        step `signal` records what ended the wait (the
 *                                        signal, or the timeout) once something did: until
 *                                        then the attempt ends SUSPENDED_SIGNAL, and a
 *                                        signal sent to the job (or the timeout) wakes it
 *
 * Because the outcome of a wait is a recorded step, a replay returns what the first run
 * got, whatever arrived since; a signal a recorded wait took is not handed to later waits
 * of the replay. The records are the Python worker's, value for value: times are epoch
 * seconds (`1767225600.5`), the end of a wait `{"name", "seq", "payload"}` or
 * `{"name", "timed_out": true}`. The wake time is the worker's clock, sent as a delay: the
 * job service's clock decides when the job is due.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

import type { DurableSteps } from "./durable_steps.js";
import { JobError } from "./job_type.js";
import type { AttemptSignals } from "./signals.js";

// shared/durable_steps.py MAX_SUSPENSION_S: the latest wake time a first run records
const MAX_SUSPENSION_MS = 366 * 86_400_000;

/** Job code sleeps or waits for a signal that has not come: the attempt ends with a
 * SUSPENDED_* code (not a failure: the attempt is handed back and refunded), to run again
 * `retryAfterMs` from now, or at the signal; `signalsSeen` is the newest signal seq the
 * attempt had fetched (a job holding a newer one is due at once). */
export class Suspension extends JobError {
  constructor(
    code: "SUSPENDED_SLEEP" | "SUSPENDED_SIGNAL",
    message: string,
    readonly retryAfterMs: number,
    readonly signalsSeen = 0,
  ) {
    super(code, message);
    this.name = "Suspension";
  }
}

export class Waits {
  constructor(
    private readonly steps: DurableSteps,
    private readonly signals: () => AttemptSignals,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Resolves once the wall clock is past `whenMs` (epoch milliseconds), which the first
   * run records; until then the attempt is suspended. */
  async sleepUntil(whenMs: number): Promise<void> {
    const until = Number(await this.steps.run("sleep", this.boundedBy(whenMs)));
    const aheadMs = until * 1000 - this.clock();
    if (aheadMs > 0) throw new Suspension("SUSPENDED_SLEEP", `asleep until ${iso(until)}`, aheadMs);
  }

  /** The payload of the next signal named `name` (each once, in send order), or null once
   * `timeoutMs` from the first run's call have passed without one. */
  async waitForSignal(name: string, timeoutMs: number): Promise<JsonObject | null> {
    if (!(timeoutMs > 0)) throw new RangeError(`a signal wait needs a timeout > 0 ms (got ${timeoutMs})`);
    const until = Number(await this.steps.run("signal_wait", this.boundedBy(this.clock() + timeoutMs)));
    const ended = (await this.steps.run("signal", () => this.signalOrTimeout(name, until))) as JsonObject;
    if (ended.name !== name) {
      throw new JobError("NONDETERMINISTIC", `a wait for signal '${name}' where a wait for '${ended.name}' was recorded`);
    }
    if ("seq" in ended) this.signals().markTaken(Number(ended.seq)); // a replay: the signal is this wait's
    return (ended.payload as JsonObject | undefined) ?? null;
  }

  private async signalOrTimeout(name: string, until: number): Promise<JsonValue> {
    const inbox = this.signals();
    const signal = await inbox.poll(name);
    if (signal !== undefined) return { name, seq: signal.seq, payload: signal.payload };
    const aheadMs = until * 1000 - this.clock();
    if (aheadMs <= 0) return { name, timed_out: true };
    throw new Suspension(
      "SUSPENDED_SIGNAL",
      `waiting for signal '${name}' until ${iso(until)}`,
      aheadMs,
      inbox.fetchedSeq,
    );
  }

  /** The wake time a first run records, in epoch seconds: `whenMs`, at most
   * MAX_SUSPENSION_MS from now. */
  private boundedBy(whenMs: number): () => number {
    return () => Math.min(whenMs, this.clock() + MAX_SUSPENSION_MS) / 1000;
  }
}

/** Python's `datetime.isoformat(timespec="seconds")` of an epoch in UTC. */
function iso(epochSeconds: number): string {
  return `${new Date(Math.floor(epochSeconds) * 1000).toISOString().slice(0, 19)}+00:00`;
}

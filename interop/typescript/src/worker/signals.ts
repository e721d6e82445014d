/**
 * An attempt's signals as its durable waits read them (worker_service/signals.py, the part
 * `ctx.wait_for_signal` uses). The job service stores every signal before delivering it,
 * numbered per job in send order (`seq`); the attempt pulls them (`FetchSignals` under its
 * lease) each time job code asks, from after the newest it holds. Each signal is handed to
 * job code at most once per attempt, in send order; a signal a recorded wait took (an
 * earlier run's) is marked taken, so a replay hands it to no later wait.
 *
 * The Python worker also learns of new signals from notices on core NATS and heartbeats,
 * for `ctx.signal`, which waits while holding the slot; a durable wait only asks once and
 * then ends the attempt, so the TypeScript worker listens for neither.
 */
import type { JsonObject } from "@bufbuild/protobuf";

import type { Executor } from "./rpc.js";

const FETCH_SIGNALS_TIMEOUT_MS = 5_000;

export type SignalFetcher = Pick<Executor, "fetchSignals">;

export interface Signal {
  readonly seq: number;
  readonly name: string;
  readonly payload: JsonObject;
}

export class AttemptSignals {
  private readonly held: Signal[] = [];
  private readonly taken = new Set<number>();
  /** The newest signal seq fetched (0: none). */
  fetchedSeq = 0;

  constructor(
    private readonly fetcher: SignalFetcher,
    private readonly lease: { readonly jobId: string; readonly leaseToken: string },
  ) {}

  /** The earliest signal named `name` not taken yet (now taken), or undefined; fetches
   * what was sent since the last call first. Rejects when the job service could not be
   * asked: a durable wait must not take silence for "none". */
  async poll(name: string): Promise<Signal | undefined> {
    await this.catchUp();
    const signal = this.held.find((held) => held.name === name && !this.taken.has(held.seq));
    if (signal !== undefined) this.taken.add(signal.seq);
    return signal;
  }

  /** A signal an earlier run took (a recorded signal wait): never handed over again. */
  markTaken(seq: number): void {
    this.taken.add(seq);
  }

  private async catchUp(): Promise<void> {
    for (;;) {
      const answer = await this.fetcher.fetchSignals(
        { jobId: this.lease.jobId, leaseToken: this.lease.leaseToken, afterSeq: BigInt(this.fetchedSeq) },
        { timeoutMs: FETCH_SIGNALS_TIMEOUT_MS },
      );
      for (const signal of answer.signals) {
        const seq = Number(signal.seq);
        if (seq <= this.fetchedSeq) continue; // in send order: a repeat
        this.held.push({ seq, name: signal.name, payload: signal.payload ?? {} });
        this.fetchedSeq = seq;
      }
      if (!answer.more) return;
    }
  }
}

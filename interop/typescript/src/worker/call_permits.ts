/**
 * Rate limits at the call, the worker's side (worker_service/call_permits.py): right before
 * each provider call, ask the job service for a permit for the model tier called — a slot
 * now, or one reserved a moment ahead and confirmed when due —, wait as long as it says,
 * and make the call within the permit's validity. A tier without a limit is answered
 * `unlimited` and not asked about again for as long as the answer says.
 */
import type { Attempt } from "./attempt.js";
import { type Executor, isTransient, pause } from "./rpc.js";

// Ask again at least this often while waiting (a block may end early for another reason).
const MAX_WAIT_MS = 2_000;
// Transport failures: ask again after this long, doubling up to MAX_WAIT_MS.
const UNREACHABLE_WAIT_MS = 100;

export class CallPermits {
  // tier -> Date.now() until which no permit is needed
  private readonly unlimitedUntil = new Map<string, number>();

  constructor(private readonly executor: Executor) {}

  /** Resolves when `attempt` may call `tier` now; rejects if the attempt is stopped
   * meanwhile, or the job service refuses (e.g. the lease is lost). */
  async acquire(attempt: Attempt, tier: string): Promise<void> {
    let backoff = UNREACHABLE_WAIT_MS;
    let reserved = "";
    for (;;) {
      attempt.signal.throwIfAborted();
      if ((this.unlimitedUntil.get(tier) ?? 0) > Date.now()) return;
      const asked = Date.now();
      let permit;
      try {
        permit = await this.executor.acquireCallPermit(
          { jobId: attempt.jobId, leaseToken: attempt.leaseToken, modelTier: tier, reservedSlot: reserved },
          { timeoutMs: 5_000, signal: attempt.signal },
        );
      } catch (caught) {
        if (!isTransient(caught)) throw caught;
        await pause(backoff, attempt.signal);
        backoff = Math.min(backoff * 2, MAX_WAIT_MS);
        continue;
      }
      const validForMs = Number(permit.validForMs);
      if (permit.unlimited) {
        this.unlimitedUntil.set(tier, Date.now() + validForMs);
        return;
      }
      if (permit.granted) {
        // the slot by the database's clock: start at or after it, within its validity
        const slotAt = permit.slotAt ? Number(permit.slotAt.seconds) * 1000 + permit.slotAt.nanos / 1e6 : undefined;
        if (slotAt === undefined) {
          if (Date.now() - asked <= validForMs) return;
        } else {
          await pause(slotAt - Date.now(), attempt.signal);
          if (Date.now() <= slotAt + validForMs) return;
        }
        reserved = ""; // arrived too late to keep the provider's view within the limit: spent
        continue;
      }
      reserved = permit.reservedSlot;
      const retryAfterMs = Number(permit.retryAfterMs);
      // a reserved slot is waited for exactly (it is confirmed a moment before it)
      await pause(reserved ? retryAfterMs : Math.min(retryAfterMs, MAX_WAIT_MS), attempt.signal);
    }
  }
}

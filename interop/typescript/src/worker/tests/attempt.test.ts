import assert from "node:assert/strict";
import { test } from "node:test";

import { outputHash } from "../../output_hash.js";
import { Attempt } from "../attempt.js";
import { JobError, type JobType } from "../job_type.js";
import { textStats } from "../text_stats.js";
import { lockedJob } from "./fakes.js";

const permits = { acquireCallPermit: async () => undefined };

function typeRunning(run: JobType["run"], timeoutSeconds = 60): JobType {
  return { spec: { ...textStats.spec, timeoutSeconds }, run };
}

test("a finished attempt succeeds with its output and the output's RFC 8785 hash", async () => {
  const attempt = new Attempt(lockedJob({ text: "a b. c" }));
  const outcome = await attempt.execute(textStats, permits);
  assert.equal(outcome.kind, "succeeded");
  assert.ok(outcome.kind === "succeeded");
  assert.equal(outcome.output.words, 3);
  assert.equal(outcome.outputHash, outputHash(outcome.output));
  assert.match(outcome.outputHash, /^jcs:sha256:[0-9a-f]{64}$/);
});

test("a cancelled attempt ends CANCELLED at once, whether or not its code notices", async () => {
  const attempt = new Attempt(lockedJob({}));
  const running = attempt.execute(typeRunning(() => new Promise(() => undefined)), permits);
  attempt.cancel("cancel_requested");
  assert.deepEqual(await running, { kind: "failed", code: "CANCELLED", message: "cancelled while running" });
});

test("the first cause wins: a shutdown after a lost lease reports nothing", async () => {
  const attempt = new Attempt(lockedJob({ text: "x", sleep_ms: 5_000 }));
  const running = attempt.execute(textStats, permits);
  assert.equal(attempt.cancel("lease_lost"), true);
  assert.equal(attempt.cancel("shutdown"), false);
  assert.deepEqual(await running, { kind: "lease_lost" });
});

test("a shutdown hands the job back as WORKER_SHUTDOWN", async () => {
  const attempt = new Attempt(lockedJob({ text: "x", sleep_ms: 5_000 }));
  const running = attempt.execute(textStats, permits);
  attempt.cancel("shutdown");
  assert.deepEqual(await running, { kind: "failed", code: "WORKER_SHUTDOWN", message: "handed back by a draining worker" });
});

test("an attempt past its spec's timeout ends TIMEOUT", async () => {
  const attempt = new Attempt(lockedJob({}));
  const outcome = await attempt.execute(typeRunning(() => new Promise(() => undefined), 0.05), permits);
  assert.deepEqual(outcome, { kind: "failed", code: "TIMEOUT", message: "no result within 0.05s" });
});

test("a JobError fails with its code; any other error is INTERNAL_ERROR", async () => {
  const rejected = await new Attempt(lockedJob({})).execute(
    typeRunning(async () => {
      throw new JobError("JOB_TEXT_UNREADABLE", "no text");
    }),
    permits,
  );
  assert.deepEqual(rejected, { kind: "failed", code: "JOB_TEXT_UNREADABLE", message: "no text" });
  const crashed = await new Attempt(lockedJob({})).execute(
    typeRunning(async () => {
      throw new TypeError("oops");
    }),
    permits,
  );
  assert.deepEqual(crashed, { kind: "failed", code: "INTERNAL_ERROR", message: "TypeError: oops" });
});

test("the heartbeat interval is a third of the lease at most", () => {
  assert.equal(new Attempt(lockedJob({}, { heartbeatIntervalMs: 5_000n, leaseTtlMs: 3_000n })).heartbeatIntervalMs, 1_000);
  assert.equal(new Attempt(lockedJob({}, { heartbeatIntervalMs: 0n, leaseTtlMs: 30_000n })).heartbeatIntervalMs, 1_000);
});

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import type { JsonObject } from "@bufbuild/protobuf";

import { JobStatus } from "../../gen/jobs/v1/job_pb.js";
import { Attempt, type Outcome } from "../attempt.js";
import { CallPermits } from "../call_permits.js";
import type { JobContext, JobType } from "../job_type.js";
import { Pipeline } from "../pipeline.js";
import { signoff } from "../signoff.js";
import { textStats } from "../text_stats.js";
import { fakeExecutor, FakeJobRecords } from "./fakes.js";

type Failed = Extract<Outcome, { kind: "failed" }>;

function typeRunning(run: (context: JobContext) => Promise<JsonObject>): JobType {
  return { spec: textStats.spec, run: (_input, context) => run(context) };
}

/** One attempt of `type` on `records`' job: its outcome and the calls it made. */
async function attemptOf(type: JobType, records: FakeJobRecords, attempt = 1, input: JsonObject = {}) {
  const { executor, calls } = fakeExecutor(records.handlers(attempt));
  const outcome = await new Attempt(records.lease(input, attempt)).execute(type, {
    acquireCallPermit: async () => undefined,
    executor,
  });
  return { outcome, calls };
}

function suspended(outcome: Outcome): Failed {
  assert.equal(outcome.kind, "failed", JSON.stringify(outcome));
  return outcome as Failed;
}

const sleeper = typeRunning(async (context) => {
  await context.sleep(60_000);
  return { woke: true };
});

test("a sleep records its wake time in epoch seconds and ends the attempt SUSPENDED_SLEEP until then", async () => {
  const records = new FakeJobRecords();
  const before = Date.now();
  const failed = suspended((await attemptOf(sleeper, records)).outcome);
  const [sleep] = records.steps;
  assert.equal(sleep?.name, "sleep");
  assert.ok(sleep?.outcome?.outcome.case === "resultJson");
  const wake = JSON.parse(sleep.outcome.outcome.value) as number;
  assert.ok(wake * 1000 >= before + 60_000 && wake * 1000 <= Date.now() + 60_000, `${wake}`);
  assert.equal(failed.code, "SUSPENDED_SLEEP");
  assert.match(failed.message, /^asleep until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
  assert.ok(failed.retryAfterMs! > 59_000 && failed.retryAfterMs! <= 60_001, `${failed.retryAfterMs}`);
  assert.equal(failed.signalsSeen, 0);
});

test("a replay sleeps on until the recorded wake time, and goes on once it passed", async () => {
  const records = new FakeJobRecords();
  records.recorded(0, "sleep", String((Date.now() + 30_000) / 1000));
  const again = await attemptOf(sleeper, records);
  const failed = suspended(again.outcome);
  assert.equal(failed.code, "SUSPENDED_SLEEP");
  assert.ok(failed.retryAfterMs! > 29_000 && failed.retryAfterMs! <= 30_001);
  assert.deepEqual(again.calls, []); // the recorded wake time stands

  const woken = new FakeJobRecords();
  woken.recorded(0, "sleep", "1700000000.25"); // as the Python worker records it
  assert.deepEqual((await attemptOf(sleeper, woken)).outcome.kind, "succeeded");
});

const waiter = typeRunning(async (context) => {
  const first = await context.waitForSignal("approve", 60_000);
  const second = await context.waitForSignal("approve", 60_000);
  return { first, second };
});

test("a wait with no signal there ends SUSPENDED_SIGNAL at its timeout, with the newest seq it fetched", async () => {
  const records = new FakeJobRecords();
  records.send("other", { n: 1 });
  records.send("other", { n: 2 });
  const { outcome, calls } = await attemptOf(waiter, records);
  const failed = suspended(outcome);
  assert.equal(failed.code, "SUSPENDED_SIGNAL");
  assert.match(failed.message, /^waiting for signal 'approve' until .*\+00:00$/);
  assert.ok(failed.retryAfterMs! > 59_000 && failed.retryAfterMs! <= 60_001);
  assert.equal(failed.signalsSeen, 2);
  // the timeout's time is recorded; how the wait ended is not, until it has
  assert.deepEqual(records.steps.map((step) => step.name), ["signal_wait"]);
  assert.deepEqual(calls.map((call) => call.rpc), ["recordStepResult", "fetchSignals"]);
  const fetched = calls[1]?.request;
  assert.deepEqual([fetched?.jobId, fetched?.leaseToken, fetched?.afterSeq], ["job-1", "lease-1", 0n]);
});

test("each signal goes to one wait, in send order, recorded with its seq and payload", async () => {
  const records = new FakeJobRecords();
  const waiting = await attemptOf(waiter, records);
  assert.equal(suspended(waiting.outcome).code, "SUSPENDED_SIGNAL");
  records.send("approve", { by: "ada" });

  const woken = await attemptOf(waiter, records);
  assert.equal(suspended(woken.outcome).code, "SUSPENDED_SIGNAL"); // the second wait waits
  assert.deepEqual(
    records.steps.map((step) => [step.ordinal, step.name]),
    [
      [0, "signal_wait"],
      [1, "signal"],
      [2, "signal_wait"],
    ],
  );
  const ended = records.steps[1]?.outcome?.outcome;
  assert.deepEqual(ended?.case === "resultJson" && JSON.parse(ended.value), {
    name: "approve",
    seq: 1,
    payload: { by: "ada" },
  });

  records.send("approve", { by: "bob" });
  const done = await attemptOf(waiter, records);
  assert.deepEqual(done.outcome.kind === "succeeded" && done.outcome.output, {
    first: { by: "ada" },
    second: { by: "bob" },
  });
});

test("a replay of a wait the Python worker recorded hands that signal to no later wait", async () => {
  const records = new FakeJobRecords();
  records.send("approve", { by: "ada" });
  records.recorded(0, "signal_wait", String(Date.now() / 1000 + 60));
  records.recorded(1, "signal", '{"name": "approve", "seq": 1, "payload": {"by": "ada"}}');
  const replayed = await attemptOf(waiter, records, 1);
  const failed = suspended(replayed.outcome);
  assert.equal(failed.code, "SUSPENDED_SIGNAL"); // signal 1 was the first wait's
  assert.equal(failed.signalsSeen, 1);
});

test("a wait past its timeout records that it timed out and returns null", async () => {
  const records = new FakeJobRecords();
  records.recorded(0, "signal_wait", String(Date.now() / 1000 - 1));
  const once = typeRunning(async (context) => ({ got: await context.waitForSignal("approve", 60_000) }));
  const { outcome } = await attemptOf(once, records);
  assert.deepEqual(outcome.kind === "succeeded" && outcome.output, { got: null });
  const ended = records.steps[1]?.outcome?.outcome;
  assert.deepEqual(ended?.case === "resultJson" && JSON.parse(ended.value), { name: "approve", timed_out: true });
});

test("a recorded wait for another signal fails the job NONDETERMINISTIC", async () => {
  const records = new FakeJobRecords();
  records.recorded(0, "signal_wait", "1700000000");
  records.recorded(1, "signal", '{"name": "reject", "timed_out": true}');
  const { outcome } = await attemptOf(waiter, records);
  assert.equal(outcome.kind === "failed" && outcome.code, "NONDETERMINISTIC");
  assert.equal(
    outcome.kind === "failed" && outcome.message,
    "a wait for signal 'approve' where a wait for 'reject' was recorded",
  );
});

test("a suspension is submitted with its wake time and the newest signal seen", async () => {
  const records = new FakeJobRecords();
  records.send("other");
  const { executor, calls } = fakeExecutor({
    ...records.handlers(),
    submitFailure: () => ({ status: JobStatus.RETRYING }),
  });
  await new Pipeline(executor, new Map([["signoff", waiter]]), new CallPermits(executor), "w-1").run(records.lease({}));
  const submit = calls.find((call) => call.rpc === "submitFailure");
  assert.equal(submit?.request.errorCode, "SUSPENDED_SIGNAL");
  assert.equal(submit.request.signalsSeen, 1n);
  const retryAfterMs = submit.request.retryAfterMs as bigint;
  assert.ok(retryAfterMs > 59_000n && retryAfterMs <= 60_001n, `${retryAfterMs}`);
});

test("signoff: request once, sleep, wait for the signature, file: each effect once per key", async () => {
  const dir = mkdtempSync(join(tmpdir(), "signoff-"));
  process.env.JOBS_SIGNOFF_LEDGER = join(dir, "ledger");
  try {
    const records = new FakeJobRecords();
    const input = { document: "lease", pause_ms: 60_000, timeout_ms: 60_000 };
    assert.equal(suspended((await attemptOf(signoff, records, 1, input)).outcome).code, "SUSPENDED_SLEEP");
    // woken at its time (the recorded wake time passed), it waits for the signature
    const sleep = records.steps[1]!;
    sleep.outcome = { ...sleep.outcome!, outcome: { case: "resultJson", value: String(Date.now() / 1000 - 1) } };
    assert.equal(suspended((await attemptOf(signoff, records, 1, input)).outcome).code, "SUSPENDED_SIGNAL");
    records.send("countersign", { by: "ada" });
    const { outcome } = await attemptOf(signoff, records, 1, input);
    assert.deepEqual(outcome.kind === "succeeded" && outcome.output, {
      receipts: ["request:job-1/0/request", "file:job-1/4/file"],
      signature: { by: "ada" },
      timed_out: false,
    });
    assert.deepEqual(readFileSync(join(dir, "ledger"), "utf8").split("\n"), ["job-1/0/request", "job-1/4/file", ""]);
  } finally {
    delete process.env.JOBS_SIGNOFF_LEDGER;
    rmSync(dir, { recursive: true, force: true });
  }
});

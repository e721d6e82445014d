import assert from "node:assert/strict";
import { test } from "node:test";

import type { JsonObject } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { Attempt, type Outcome } from "../attempt.js";
import { JobError, type JobContext, type JobType } from "../job_type.js";
import { textStats } from "../text_stats.js";
import { fakeExecutor, FakeJobRecords, lockedJob, refusal } from "./fakes.js";

function typeRunning(run: (context: JobContext) => Promise<JsonObject>): JobType {
  return { spec: textStats.spec, run: (_input, context) => run(context) };
}

async function attemptOn(
  handlers: Parameters<typeof fakeExecutor>[0],
  run: (context: JobContext) => Promise<JsonObject>,
  job = lockedJob({}),
  now?: () => number,
): Promise<{ outcome: Outcome; calls: ReturnType<typeof fakeExecutor>["calls"] }> {
  const { executor, calls } = fakeExecutor(handlers);
  const attempt = new Attempt(job, now);
  const outcome = await attempt.execute(typeRunning(run), { acquireCallPermit: async () => undefined, executor });
  return { outcome, calls };
}

test("a first run calls each step once, under its key, and records its JSON result in order", async () => {
  const records = new FakeJobRecords();
  const keys: string[] = [];
  const { outcome } = await attemptOn(records.handlers(), async (context) => {
    const charged = await context.step("charge", async () => {
      keys.push(context.stepKey);
      return { id: "ch_1", cents: 250 };
    });
    const sent = await context.step("notify", () => {
      keys.push(context.stepKey);
    });
    return { charged, sent };
  });
  assert.deepEqual(keys, ["job-1/0/charge", "job-1/1/notify"]);
  // what was recorded is what the code gets back: the value through JSON
  assert.deepEqual(outcome, {
    kind: "succeeded",
    output: { charged: { id: "ch_1", cents: 250 }, sent: null },
    outputHash: (outcome as { outputHash: string }).outputHash,
  });
  assert.deepEqual(
    records.steps.map((step) => [step.ordinal, step.name, step.outcome?.outcome]),
    [
      [0, "charge", { case: "resultJson", value: '{"id":"ch_1","cents":250}' }],
      [1, "notify", { case: "resultJson", value: "null" }],
    ],
  );
});

test("a replay returns the recorded results (a Python worker's JSON too) without calling the steps", async () => {
  const records = new FakeJobRecords();
  records.recorded(0, "charge", '{"id": "ch_1", "cents": 250}');
  let calls = 0;
  const { outcome } = await attemptOn(
    records.handlers(2),
    async (context) => {
      const charged = await context.step("charge", async () => ++calls);
      const notified = await context.step("notify", async () => ++calls);
      return { charged, notified };
    },
    records.lease({}, 2),
  );
  assert.equal(outcome.kind, "succeeded");
  assert.deepEqual(outcome.kind === "succeeded" && outcome.output, { charged: { id: "ch_1", cents: 250 }, notified: 1 });
  assert.equal(calls, 1); // notify only
  assert.deepEqual(
    records.steps.map((step) => [step.name, step.attempt]),
    [
      ["charge", 1],
      ["notify", 2],
    ],
  );
});

test("another step at a recorded position fails the job NONDETERMINISTIC, naming both", async () => {
  const records = new FakeJobRecords();
  records.recorded(0, "reserve", '"r"');
  const { outcome, calls } = await attemptOn(
    records.handlers(2),
    async (context) => ({ charged: await context.step("charge", () => "c") }),
    records.lease({}, 2),
  );
  assert.equal(outcome.kind, "failed");
  assert.ok(outcome.kind === "failed");
  assert.equal(outcome.code, "NONDETERMINISTIC");
  assert.match(outcome.message, /^step 0 is 'charge' in this run, but 'reserve' was recorded there/);
  assert.deepEqual(calls, []);
});

test("a JobError a step throws is recorded and thrown again on replay; other errors are not recorded", async () => {
  const records = new FakeJobRecords();
  const declined = async (context: JobContext) => {
    await context.step("charge", () => {
      throw new JobError("JOB_REJECTED", "the card was declined");
    });
    return {};
  };
  const first = await attemptOn(records.handlers(), declined);
  assert.deepEqual(first.outcome, { kind: "failed", code: "JOB_REJECTED", message: "the card was declined" });
  const recorded = records.steps[0]?.outcome?.outcome;
  assert.ok(recorded?.case === "error");
  assert.deepEqual([recorded.value.code, recorded.value.message], ["JOB_REJECTED", "the card was declined"]);

  let called = false;
  const replayed = await attemptOn(
    records.handlers(2),
    async (context) => {
      await context.step("charge", () => {
        called = true;
      });
      return {};
    },
    records.lease({}, 2),
  );
  assert.deepEqual(replayed.outcome, { kind: "failed", code: "JOB_REJECTED", message: "the card was declined" });
  assert.equal(called, false);

  const crashed = await attemptOn({}, async (context) => {
    await context.step("charge", () => {
      throw new TypeError("socket hang up");
    });
    return {};
  });
  assert.deepEqual(crashed.outcome, { kind: "failed", code: "INTERNAL_ERROR", message: "TypeError: socket hang up" });
  assert.deepEqual(crashed.calls, []); // nothing recorded: the next attempt calls it again
});

test("the first outcome wins: a record answered `recorded = false` goes on with the stored one", async () => {
  const records = new FakeJobRecords();
  records.recorded(0, "charge", '"theirs"', 3); // recorded by a call whose answer was lost
  const { outcome } = await attemptOn(
    { recordStepResult: records.handlers().recordStepResult! },
    async (context) => ({ charged: await context.step("charge", () => "ours") }),
  );
  assert.deepEqual(outcome.kind === "succeeded" && outcome.output, { charged: "theirs" });
});

test("a record is retried while the job service is unreachable", async () => {
  const records = new FakeJobRecords();
  let failures = 2;
  const { outcome, calls } = await attemptOn(
    {
      recordStepResult: (request) => {
        if (failures-- > 0) throw refusal(Code.Unavailable, "");
        return records.handlers().recordStepResult!(request);
      },
    },
    async (context) => ({ charged: await context.step("charge", () => 1) }),
  );
  assert.deepEqual(outcome.kind === "succeeded" && outcome.output, { charged: 1 });
  assert.equal(calls.length, 3);
  assert.ok(calls.every((call) => call.options.timeoutMs === 5_000));
});

test("a lost lease stops the attempt, which reports nothing", async () => {
  const { outcome } = await attemptOn(
    { recordStepResult: () => Promise.reject(refusal(Code.Aborted, "LEASE_LOST")) },
    async (context) => ({ charged: await context.step("charge", () => 1) }),
  );
  assert.deepEqual(outcome, { kind: "lease_lost" });
});

test("no step function is called once the lease has run out by the worker's clock", async () => {
  let now = 0;
  let called = false;
  const { outcome, calls } = await attemptOn(
    {},
    async (context) => {
      now = 5_001; // paused past the 5 s lease (SIGSTOP, a long GC)
      await context.step("charge", () => {
        called = true;
      });
      return {};
    },
    lockedJob({}),
    () => now,
  );
  assert.deepEqual(outcome, { kind: "lease_lost" });
  assert.equal(called, false);
  assert.deepEqual(calls, []);
});

test("a result JSON cannot hold fails the attempt and records nothing", async () => {
  const { outcome, calls } = await attemptOn({}, async (context) => ({ ratio: await context.step("ratio", () => Number.NaN) }));
  assert.equal(outcome.kind === "failed" && outcome.code, "INTERNAL_ERROR");
  assert.match(outcome.kind === "failed" ? outcome.message : "", /^step ratio returned a value JSON cannot hold/);
  assert.deepEqual(calls, []);
});

test("a step's name is checked; its key is readable only inside it; steps do not nest", async () => {
  const bad = await attemptOn({}, async (context) => ({ x: await context.step("Charge!", () => 1) }));
  assert.equal(bad.outcome.kind === "failed" && bad.outcome.code, "INTERNAL_ERROR");
  assert.match(bad.outcome.kind === "failed" ? bad.outcome.message : "", /RangeError: a step's name is 1\.\.64 of a-z/);

  const outside = await attemptOn({}, async (context) => ({ key: context.stepKey }));
  assert.match(outside.outcome.kind === "failed" ? outside.outcome.message : "", /there is none/);

  const nested = await attemptOn({}, async (context) => ({
    x: await context.step("outer", () => context.step("inner", () => 1)),
  }));
  assert.match(nested.outcome.kind === "failed" ? nested.outcome.message : "", /cannot run inside another one/);
});

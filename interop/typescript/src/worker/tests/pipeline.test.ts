import assert from "node:assert/strict";
import { test } from "node:test";

import { Code } from "@connectrpc/connect";

import { LockOutcome } from "../../gen/jobs/v1/executor_service_pb.js";
import { JobStatus } from "../../gen/jobs/v1/job_pb.js";
import { outputHash } from "../../output_hash.js";
import { CallPermits } from "../call_permits.js";
import type { DispatchSource } from "../dispatch.js";
import { QueueIntake } from "../intake.js";
import { Pipeline } from "../pipeline.js";
import { textStats } from "../text_stats.js";
import { eventually, fakeExecutor, FakeMessage, lockedJob, refusal } from "./fakes.js";

const TYPES = new Map([["text_stats", textStats]]);

function pipelineOn(handlers: Parameters<typeof fakeExecutor>[0]) {
  const { executor, calls } = fakeExecutor(handlers);
  return { pipeline: new Pipeline(executor, TYPES, new CallPermits(executor), "w-1"), calls };
}

test("a result is submitted with its output and RFC 8785 hash", async () => {
  const { pipeline, calls } = pipelineOn({ submitResult: () => ({ status: JobStatus.SUCCEEDED }) });
  await pipeline.run(lockedJob({ text: "a a b" }));
  const [submit] = calls;
  assert.equal(submit?.rpc, "submitResult");
  const output = submit.request.output as Record<string, unknown>;
  assert.deepEqual(output.top_words, [{ word: "a", count: 2 }, { word: "b", count: 1 }]);
  assert.equal(submit.request.outputHash, outputHash(output as never));
  assert.equal(submit.request.leaseToken, "lease-1");
});

test("a heartbeat that says a cancel was asked stops the job: SubmitFailure CANCELLED", async () => {
  const { pipeline, calls } = pipelineOn({
    heartbeat: () => ({ cancelRequested: true }),
    submitFailure: () => ({ status: JobStatus.CANCELLED }),
  });
  const started = Date.now();
  await pipeline.run(lockedJob({ text: "x", sleep_ms: 10_000 }));
  assert.ok(Date.now() - started < 2_000);
  assert.deepEqual(calls.map((call) => call.rpc), ["heartbeat", "submitFailure"]);
  assert.equal(calls[1]?.request.errorCode, "CANCELLED");
});

test("every call's deadline is whole milliseconds (grpcio refuses a grpc-timeout with a fraction)", async () => {
  let beats = 0;
  const { pipeline, calls } = pipelineOn({
    heartbeat: () => ({ cancelRequested: ++beats >= 2 }),
    submitFailure: () => ({ status: JobStatus.CANCELLED }),
  });
  // a heartbeat every third of a 100 ms lease: 33.3 ms
  await pipeline.run(lockedJob({ text: "x", sleep_ms: 10_000 }, { leaseTtlMs: 100n, heartbeatIntervalMs: 1_000n }));
  assert.deepEqual(calls.map((call) => call.rpc), ["heartbeat", "heartbeat", "submitFailure"]);
  for (const call of calls) assert.ok(Number.isInteger(call.options.timeoutMs), `${call.rpc}: ${call.options.timeoutMs}`);
});

test("a lost lease reports nothing", async () => {
  const { pipeline, calls } = pipelineOn({
    heartbeat: () => {
      throw refusal(Code.Aborted, "LEASE_LOST");
    },
  });
  await pipeline.run(lockedJob({ text: "x", sleep_ms: 10_000 }));
  assert.deepEqual(calls.map((call) => call.rpc), ["heartbeat"]);
});

test("a cancel message stops the job while it runs", async () => {
  const { pipeline, calls } = pipelineOn({
    heartbeat: () => ({ cancelRequested: false }),
    submitFailure: () => ({ status: JobStatus.CANCELLED }),
  });
  const running = pipeline.run(lockedJob({ text: "x", sleep_ms: 10_000 }, { heartbeatIntervalMs: 1_000n }));
  assert.equal(pipeline.cancel("job-1"), true);
  await running;
  assert.deepEqual(calls.map((call) => [call.rpc, call.request.errorCode]), [["submitFailure", "CANCELLED"]]);
});

test("a result the job service refuses as invalid is reported as VALIDATION_OUTPUT_SCHEMA", async () => {
  const { pipeline, calls } = pipelineOn({
    submitResult: () => {
      throw refusal(Code.InvalidArgument, "INVALID_OUTPUT");
    },
    submitFailure: () => ({ status: JobStatus.RETRYING }),
  });
  await pipeline.run(lockedJob({ text: "x", break_output_schema: true }));
  assert.deepEqual(calls.map((call) => call.rpc), ["submitResult", "submitFailure"]);
  assert.equal(calls[1]?.request.errorCode, "VALIDATION_OUTPUT_SCHEMA");
});

test("a submit is retried while the job service is unreachable", async () => {
  let failures = 2;
  const { pipeline, calls } = pipelineOn({
    submitResult: () => {
      if (failures-- > 0) throw refusal(Code.Unavailable, "");
      return { status: JobStatus.SUCCEEDED };
    },
  });
  await pipeline.run(lockedJob({ text: "x" }));
  assert.equal(calls.length, 3);
});

/** A dispatch source that hands out `messages` once, then nothing. */
function sourceOf(messages: FakeMessage[]): DispatchSource {
  return {
    queue: "ai-background",
    async fetch(max: number, _expiresMs: number, take: (message: never) => void, stop: AbortSignal) {
      for (const message of messages.splice(0, max)) take(message.asJsMsg() as never);
      await new Promise((resolve) => (stop.aborted ? resolve(undefined) : setTimeout(resolve, 10)));
    },
  } as unknown as DispatchSource;
}

test("intake: a locked token is acked and run; NOT_DUE handed back with its delay; UNAVAILABLE dropped", async () => {
  const answers = [
    { outcome: LockOutcome.LOCKED, job: lockedJob({ text: "x" }) },
    { outcome: LockOutcome.NOT_DUE, retryAfter: { seconds: BigInt(Math.floor(Date.now() / 1000) + 3), nanos: 0 } },
    { outcome: LockOutcome.UNAVAILABLE },
  ];
  const { executor, calls } = fakeExecutor({
    lockJobs: () => ({ responses: [answers.shift()] }),
    submitResult: () => ({ status: JobStatus.SUCCEEDED }),
  });
  const pipeline = new Pipeline(executor, TYPES, new CallPermits(executor), "w-1");
  const messages = [new FakeMessage({ job_id: "a" }), new FakeMessage({ job_id: "b" }), new FakeMessage({ job_id: "c" })];
  const malformed = new FakeMessage("not json");
  const intake = new QueueIntake(sourceOf([...messages, malformed]), 4, executor, pipeline, "w-1", ["text_stats@1"], 1_000);
  const running = intake.run();
  await eventually(() => calls.some((call) => call.rpc === "submitResult") && messages.every((m) => m.settled));
  intake.stop();
  await running;
  assert.deepEqual(messages[0]?.settled, { how: "ack" });
  assert.equal(messages[1]?.settled?.how, "nak");
  const delay = (messages[1]?.settled as { delay: number }).delay;
  assert.ok(delay > 1_000 && delay <= 3_000, `NOT_DUE delay ${delay}`);
  assert.deepEqual(messages[2]?.settled, { how: "ack" });
  assert.deepEqual(malformed.settled, { how: "ack" });
  const lock = calls.find((call) => call.rpc === "lockJobs")!.request;
  assert.equal(lock.queue, "ai-background");
  assert.deepEqual(lock.runnableDefinitions, ["text_stats@1"]);
});

test("intake: a token whose LockJobs failed is handed back, sooner when the job service was unreachable", async () => {
  const errors = [refusal(Code.Unavailable, ""), refusal(Code.Internal, "INTERNAL")];
  const { executor } = fakeExecutor({
    lockJobs: () => {
      throw errors.shift();
    },
  });
  const pipeline = new Pipeline(executor, TYPES, new CallPermits(executor), "w-1");
  const messages = [new FakeMessage({ job_id: "a" }), new FakeMessage({ job_id: "b" })];
  const intake = new QueueIntake(sourceOf([...messages]), 1, executor, pipeline, "w-1", [], 1_000);
  const running = intake.run();
  await eventually(() => messages.every((m) => m.settled));
  intake.stop();
  await running;
  assert.deepEqual(messages.map((m) => m.settled), [
    { how: "nak", delay: 1_000 },
    { how: "nak", delay: 5_000 },
  ]);
});

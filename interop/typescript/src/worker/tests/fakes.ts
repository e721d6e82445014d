/** A fake job service (the ExecutorService calls the worker makes) and a fake JetStream
 * message, for the worker's unit tests: no sockets. */
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { JsMsg } from "nats";

import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import {
  type LockedJob,
  LockedJobSchema,
  type StepResult,
  StepResultSchema,
} from "../../gen/jobs/v1/executor_service_pb.js";
import type { JobContext } from "../job_type.js";
import type { Executor } from "../rpc.js";

export type Call = { rpc: string; request: Record<string, unknown>; options: { timeoutMs?: number } };

/** An executor whose answers `handlers` give (by rpc name); every call is recorded. */
export function fakeExecutor(handlers: Record<string, (request: any) => unknown>): { executor: Executor; calls: Call[] } {
  const calls: Call[] = [];
  const executor = new Proxy(
    {},
    {
      get: (_target, rpc: string) => async (request: Record<string, unknown>, options: { timeoutMs?: number } = {}) => {
        calls.push({ rpc, request, options });
        const handler = handlers[rpc];
        if (handler === undefined) throw new Error(`unexpected call ${rpc}`);
        return handler(request);
      },
    },
  ) as Executor;
  return { executor, calls };
}

/** A refused call as the job service sends it: a code and an ErrorInfo reason. */
export function refusal(code: Code, reason: string): ConnectError {
  return new ConnectError(reason, code, undefined, [
    { desc: ErrorInfoSchema, value: { reason, domain: "jobs.v1.ExecutorService" } },
  ]);
}

export function lockedJob(input: Record<string, unknown>, overrides: Omit<MessageInitShape<typeof LockedJobSchema>, "$typeName"> = {}): LockedJob {
  return create(LockedJobSchema, {
    jobId: "job-1",
    jobType: "text_stats",
    leaseToken: "lease-1",
    attempt: 1,
    input: input as never,
    leaseTtlMs: 5_000n,
    heartbeatIntervalMs: 20n,
    leaseExpiresAt: timestampFromMs(Date.now() + 5_000),
    ...overrides,
  });
}

export class FakeMessage {
  settled: { how: "ack" } | { how: "nak"; delay: number | undefined } | undefined;
  readonly data: Uint8Array;

  constructor(body: unknown) {
    this.data = new TextEncoder().encode(typeof body === "string" ? body : JSON.stringify(body));
  }

  ack(): void {
    this.settled = { how: "ack" };
  }

  nak(delay?: number): void {
    this.settled = { how: "nak", delay };
  }

  asJsMsg(): JsMsg {
    return this as unknown as JsMsg;
  }
}

/** Resolves once `condition()` holds; rejects after `timeoutMs`. */
export async function eventually(condition: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A job context for calling a type's `run` directly: no durable steps or waits. */
export function plainContext(signal: AbortSignal = new AbortController().signal): JobContext {
  const none = (): never => {
    throw new Error("no durable steps in this test");
  };
  return {
    jobId: "j",
    attempt: 1,
    signal,
    progress() {},
    async acquireCallPermit() {},
    step: none,
    get stepKey(): string {
      return none();
    },
    sleep: none,
    sleepUntil: none,
    waitForSignal: none,
  };
}

/** The job service's side of durable steps and waits, for attempts of one job run one after
 * another: the outcomes recorded (the first at an ordinal stays, as RecordStepResult keeps
 * it), handed to the next attempt with its lease, and the signals sent to the job. */
export class FakeJobRecords {
  readonly steps: StepResult[] = [];
  readonly signals: { seq: bigint; name: string; payload: JsonObject }[] = [];

  /** A step as a worker (of either language) recorded it. */
  recorded(ordinal: number, name: string, resultJson: string, attempt = 1): void {
    this.steps.push(create(StepResultSchema, { ordinal, name, outcome: { outcome: { case: "resultJson", value: resultJson } }, attempt }));
  }

  send(name: string, payload: JsonObject = {}): void {
    this.signals.push({ seq: BigInt(this.signals.length + 1), name, payload });
  }

  /** The next attempt's lease: the job with the outcomes recorded so far. */
  lease(input: Record<string, unknown>, attempt = 1): LockedJob {
    return lockedJob(input, { jobType: "signoff", attempt, stepResults: [...this.steps] });
  }

  handlers(attempt = 1): Record<string, (request: any) => unknown> {
    return {
      recordStepResult: (request: { ordinal: number; name: string; outcome: StepResult["outcome"] }) => {
        const stored = this.steps.find((step) => step.ordinal === request.ordinal);
        if (stored !== undefined) return { recorded: false, stored };
        this.steps.push(create(StepResultSchema, { ordinal: request.ordinal, name: request.name, outcome: request.outcome, attempt }));
        return { recorded: true };
      },
      fetchSignals: (request: { afterSeq: bigint }) => ({
        signals: this.signals.filter((signal) => signal.seq > request.afterSeq),
        more: false,
      }),
    };
  }
}

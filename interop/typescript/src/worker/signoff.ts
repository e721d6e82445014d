/**
 * The example of durable steps and waits in TypeScript (issue 45): a document sent out for
 * a countersignature. One attempt may run it only in part: the job sleeps and waits while
 * holding no worker slot, and each run replays what the earlier ones recorded.
 *
 *     step "request"                  ask for the countersignature (a side effect, made
 *                                     once per job under its step key)
 *     sleep pause_ms                  a cooling-off period
 *     waitForSignal "countersign"     the signature (a signal's payload), or null after
 *                                     timeout_ms
 *     step "file"                     file the outcome (another side effect)
 *
 * The effects are lines in a ledger standing for the external system that receives them:
 * the file JOBS_SIGNOFF_LEDGER names (each line the step key, as a system deduplicating by
 * key logs what it got), or this worker's log when it is unset. On a worker started with a
 * ledger (a test), `crash_at` SIGKILLs the worker process during the first attempt's
 * "request" step, after its effect and before its record ("after_effect") or after both
 * ("after_record").
 */
import { appendFileSync } from "node:fs";

import type { JsonObject } from "@bufbuild/protobuf";

import { CredentialMode } from "../gen/jobs/v1/job_pb.js";
import { AbortStrategy } from "../gen/jobs/v1/job_type_pb.js";
import { type JobContext, type JobType, schemaJson } from "./job_type.js";
import * as log from "./log.js";

export const SIGNAL_NAME = "countersign";

const INPUT_SCHEMA: JsonObject = {
  title: "SignoffInput",
  type: "object",
  properties: {
    document: { type: "string", minLength: 1, maxLength: 200, description: "What is to be countersigned." },
    pause_ms: {
      type: "integer",
      minimum: 0,
      maximum: 86_400_000,
      default: 0,
      description: "A durable sleep between the request and the wait for the signature.",
    },
    timeout_ms: {
      type: "integer",
      minimum: 1,
      maximum: 604_800_000,
      default: 3_600_000,
      description: "How long to wait for the signature.",
    },
    crash_at: {
      enum: ["", "after_effect", "after_record"],
      default: "",
      description: "Tests: SIGKILL the worker during the first request (with a ledger only).",
    },
  },
  required: ["document"],
  additionalProperties: false,
};

const OUTPUT_SCHEMA: JsonObject = {
  title: "SignoffOutput",
  type: "object",
  properties: {
    receipts: { type: "array", items: { type: "string" }, minItems: 2, maxItems: 2 },
    signature: { type: ["object", "null"] },
    timed_out: { type: "boolean" },
  },
  required: ["receipts", "signature", "timed_out"],
  additionalProperties: false,
};

export const signoff: JobType = {
  spec: {
    jobType: "signoff",
    version: "1",
    label: "Countersignature (durable steps and waits)",
    domain: "interop",
    queue: "ai-interactive",
    inputSchemaJson: schemaJson(INPUT_SCHEMA),
    outputSchemaJson: schemaJson(OUTPUT_SCHEMA),
    inputSchemaVersion: "1",
    outputSchemaVersion: "1",
    // an attempt's running time: never the time the job sleeps or waits
    timeoutSeconds: 60,
    maxAttempts: 3,
    backoffBaseSeconds: 0.5,
    backoffMaxSeconds: 10,
    abortStrategy: AbortStrategy.FAIL,
    cancellable: true,
    // one slot: a job asleep or waiting holds none, so the others run meanwhile
    concurrency: 1,
    fairnessKey: "user",
    snapshotFields: ["document", "pause_ms", "timeout_ms", "crash_at"],
    snapshotTtlSeconds: 7 * 24 * 3600,
    redactionVersion: "1",
    credentialModes: [CredentialMode.PLATFORM],
  },
  run: signOff,
};

async function signOff(input: JsonObject, context: JobContext): Promise<JsonObject> {
  const document = String(input.document ?? "");
  const pauseMs = typeof input.pause_ms === "number" ? input.pause_ms : 0;
  const timeoutMs = typeof input.timeout_ms === "number" ? input.timeout_ms : 3_600_000;
  const crashAt = typeof input.crash_at === "string" ? input.crash_at : "";
  let requestedHere = false;
  const requested = await context.step("request", () => {
    const receipt = effect(context, "request", document);
    requestedHere = true;
    if (crashAt === "after_effect") crash(context);
    return receipt;
  });
  // only the run that made the request: a replay (attempt 2, or a wake) goes on
  if (crashAt === "after_record" && requestedHere) crash(context);
  await context.sleep(pauseMs);
  const signature = await context.waitForSignal(SIGNAL_NAME, timeoutMs);
  const filed = await context.step("file", () => effect(context, "file", document));
  return { receipts: [requested, filed], signature, timed_out: signature === null };
}

/** Makes the step's effect in the ledger, under the step's key; the receipt. */
function effect(context: JobContext, step: string, document: string): string {
  const key = context.stepKey;
  const ledger = process.env.JOBS_SIGNOFF_LEDGER;
  if (ledger) appendFileSync(ledger, `${key}\n`);
  else log.info("signoff effect", { job_id: context.jobId, step_key: key, step, document });
  return `${step}:${key}`;
}

function crash(context: JobContext): void {
  if (process.env.JOBS_SIGNOFF_LEDGER && context.attempt === 1) process.kill(process.pid, "SIGKILL");
}

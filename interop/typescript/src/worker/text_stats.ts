/**
 * The example job type written in TypeScript: statistics of a text (words, characters,
 * sentences, its most frequent words). Its code runs on this worker only; the job service
 * knows it by the spec the worker declares.
 *
 * Two input fields exist for tests: `sleep_ms` holds the attempt that long (in steps that
 * watch for a cancel), and `break_output_schema` makes it answer an output its own output
 * schema refuses (the job service must refuse it and store nothing of it).
 */
import type { JsonObject } from "@bufbuild/protobuf";

import { CredentialMode } from "../gen/jobs/v1/job_pb.js";
import { AbortStrategy } from "../gen/jobs/v1/job_type_pb.js";
import { type JobContext, type JobType, schemaJson } from "./job_type.js";

const INPUT_SCHEMA: JsonObject = {
  title: "TextStatsInput",
  type: "object",
  properties: {
    text: { type: "string", minLength: 1, maxLength: 100_000, description: "The text to count." },
    top: {
      type: "integer",
      minimum: 1,
      maximum: 50,
      default: 5,
      description: "How many of the most frequent words to list.",
    },
    sleep_ms: {
      type: "integer",
      minimum: 0,
      maximum: 60_000,
      default: 0,
      description: "Hold the attempt this long first (tests catch it mid-job).",
    },
    break_output_schema: {
      type: "boolean",
      default: false,
      description: "Answer an output the output schema refuses (the refusal test).",
    },
  },
  required: ["text"],
  additionalProperties: false,
};

const COUNT = { type: "integer", minimum: 0 };

const OUTPUT_SCHEMA: JsonObject = {
  title: "TextStatsOutput",
  type: "object",
  properties: {
    words: COUNT,
    characters: COUNT,
    sentences: COUNT,
    top_words: {
      type: "array",
      items: {
        type: "object",
        properties: { word: { type: "string", minLength: 1 }, count: { type: "integer", minimum: 1 } },
        required: ["word", "count"],
        additionalProperties: false,
      },
    },
  },
  required: ["words", "characters", "sentences", "top_words"],
  additionalProperties: false,
};

// Held in steps this long at most, so that a cancel stops the job within one step.
const SLEEP_STEP_MS = 50;
const WORD = /[\p{L}\p{N}]+(?:['’][\p{L}\p{N}]+)*/gu;
const HAS_WORD = /[\p{L}\p{N}]/u;
const SENTENCE_END = /[.!?]+(?:\s|$)/u;

export const textStats: JobType = {
  spec: {
    jobType: "text_stats",
    version: "1",
    label: "Text statistics",
    domain: "interop",
    queue: "ai-background",
    inputSchemaJson: schemaJson(INPUT_SCHEMA),
    outputSchemaJson: schemaJson(OUTPUT_SCHEMA),
    inputSchemaVersion: "1",
    outputSchemaVersion: "1",
    timeoutSeconds: 120,
    maxAttempts: 3,
    backoffBaseSeconds: 0.5,
    backoffMaxSeconds: 10,
    abortStrategy: AbortStrategy.FAIL,
    cancellable: true,
    concurrency: 4,
    fairnessKey: "user",
    // the whole input: it holds no secret, and the attempt needs every field
    snapshotFields: ["text", "top", "sleep_ms", "break_output_schema"],
    snapshotTtlSeconds: 7 * 24 * 3600,
    redactionVersion: "1",
    credentialModes: [CredentialMode.PLATFORM],
  },
  run: countText,
};

async function countText(input: JsonObject, context: JobContext): Promise<JsonObject> {
  const text = String(input.text ?? "");
  const top = typeof input.top === "number" ? input.top : 5;
  const sleepMs = typeof input.sleep_ms === "number" ? input.sleep_ms : 0;
  await holdFor(sleepMs, context);
  const stats = statsOf(text, top);
  if (input.break_output_schema === true) {
    return { ...stats, words: `${stats.words} words` }; // a string where an integer is due
  }
  return stats;
}

export function statsOf(text: string, top: number): JsonObject {
  const words = (text.match(WORD) ?? []).map((word) => word.toLowerCase());
  const counts = new Map<string, number>();
  for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1);
  const ranked = [...counts.entries()]
    .sort(([a, m], [b, n]) => n - m || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, top)
    .map(([word, count]) => ({ word, count }));
  const sentences = text.split(SENTENCE_END).filter((part) => HAS_WORD.test(part)).length;
  return {
    words: words.length,
    characters: [...text].length, // code points, not UTF-16 units
    sentences,
    top_words: ranked,
  };
}

async function holdFor(ms: number, context: JobContext): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    context.signal.throwIfAborted();
    context.progress(1 - (until - Date.now()) / ms);
    await new Promise((resolve) => setTimeout(resolve, Math.min(SLEEP_STEP_MS, until - Date.now())));
  }
}

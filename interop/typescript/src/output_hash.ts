/**
 * The output hash of docs/api.md "The output hash", computed here to check the one the job shows:
 * "jcs:sha256:" + hex sha256 of the output's RFC 8785 canonical JSON.
 *
 * RFC 8785 is defined in ECMAScript's terms (numbers as `Number.prototype.toString` prints a
 * double, strings as `JSON.stringify` escapes them, keys sorted by UTF-16 code units, which
 * is what `Array.prototype.sort` compares), so JavaScript needs no library for it.
 */
import { createHash } from "node:crypto";

import type { JsonValue } from "@bufbuild/protobuf";

export const SCHEME = "jcs:sha256:";

/** RFC 8785 canonical JSON of a JSON value (what a protobuf Struct decodes to). */
export function canonicalJson(value: JsonValue): string {
  if (Array.isArray(value)) {
    return `[${value.map(canonicalJson).join(",")}]`;
  }
  if (value !== null && typeof value === "object") {
    const members = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key] as JsonValue)}`);
    return `{${members.join(",")}}`;
  }
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new RangeError(`RFC 8785 has no ${value}`);
  }
  return JSON.stringify(value);
}

export function outputHash(output: JsonValue): string {
  return SCHEME + createHash("sha256").update(canonicalJson(output), "utf8").digest("hex");
}

// docs/api.md's vector: {"b": 2, "a": 1} is {"a":1,"b":2}; main checks it before trusting outputHash
export const VECTOR = {
  value: { b: 2, a: 1 },
  hash: "jcs:sha256:43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777",
} as const;

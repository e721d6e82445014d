import assert from "node:assert/strict";
import { test } from "node:test";

import { JSON_SCHEMA_DIALECT } from "../job_type.js";
import { statsOf, textStats } from "../text_stats.js";
import { plainContext } from "./fakes.js";

test("counts words, characters, sentences and the most frequent words", () => {
  const stats = statsOf("The cat sat. The cat ran! Did the dog? Naïve café's 😀", 2);
  assert.deepEqual(stats, {
    words: 11,
    characters: 53, // code points: 😀 is one, as Python's len() counts it
    sentences: 4,
    top_words: [
      { word: "the", count: 3 },
      { word: "cat", count: 2 },
    ],
  });
});

test("an empty text of blanks has no words and no sentence", () => {
  assert.deepEqual(statsOf("  ...  ", 5), { words: 0, characters: 7, sentences: 0, top_words: [] });
});

test("ties are listed in word order", () => {
  assert.deepEqual(statsOf("b a c a b c", 3).top_words, [
    { word: "a", count: 2 },
    { word: "b", count: 2 },
    { word: "c", count: 2 },
  ]);
});

test("the spec's schemas are draft 2020-12 JSON texts with sorted keys", () => {
  const input = JSON.parse(textStats.spec.inputSchemaJson!);
  const output = JSON.parse(textStats.spec.outputSchemaJson!);
  assert.equal(input.$schema, JSON_SCHEMA_DIALECT);
  assert.equal(output.$schema, JSON_SCHEMA_DIALECT);
  assert.deepEqual(input.required, ["text"]);
  assert.deepEqual(Object.keys(input.properties).sort(), [...textStats.spec.snapshotFields!].sort());
  assert.deepEqual(Object.keys(input), Object.keys(input).sort());
  assert.equal(output.properties.words.type, "integer");
});

test("break_output_schema answers words as a string, which the output schema refuses", async () => {
  const context = plainContext();
  const good = await textStats.run({ text: "one two" }, context);
  const broken = await textStats.run({ text: "one two", break_output_schema: true }, context);
  assert.equal(good.words, 2);
  assert.equal(broken.words, "2 words");
});

test("sleep_ms stops early when the attempt is aborted", async () => {
  const stop = new AbortController();
  const context = plainContext(stop.signal);
  const started = Date.now();
  const running = textStats.run({ text: "x", sleep_ms: 10_000 }, context);
  setTimeout(() => stop.abort(new Error("cancelled")), 30);
  await assert.rejects(running, /cancelled/);
  assert.ok(Date.now() - started < 1_000);
});

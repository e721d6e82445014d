import assert from "node:assert/strict";
import { test } from "node:test";

import { Code } from "@connectrpc/connect";

import { declareJobTypes } from "../declare.js";
import type { Executor } from "../rpc.js";
import { WorkerSession } from "../session.js";
import { textStats } from "../text_stats.js";
import { eventually, fakeExecutor, refusal } from "./fakes.js";

type Request = { workerId?: string; incarnation?: string; goodbye?: boolean };

/** A job service's side of WorkerSession: answers the hello, each ping and the goodbye;
 * ends the `breakAfter`th session on its own after its hello. */
function sessions(breakAfter = 0) {
  const received: Request[][] = [];
  const executor = {
    workerSession(requests: AsyncIterable<Request>) {
      const mine: Request[] = [];
      received.push(mine);
      const number = received.length;
      return (async function* () {
        for await (const request of requests) {
          mine.push(request);
          if (request.workerId) {
            yield { sessionId: `s${number}`, pingIntervalMs: 20n, closed: false };
            if (number === breakAfter) return;
          } else if (request.goodbye) {
            yield { sessionId: "", pingIntervalMs: 0n, closed: true };
            return;
          } else {
            yield { sessionId: "", pingIntervalMs: 0n, closed: false };
          }
        }
      })();
    },
  } as unknown as Executor;
  return { executor, received };
}

test("the session says who it is, pings, and ends with a goodbye", async () => {
  const { executor, received } = sessions();
  const session = new WorkerSession(executor, "w-1");
  session.start();
  await session.registered;
  await eventually(() => (received[0]?.length ?? 0) >= 3); // the hello and two pings
  await session.close();
  const [hello, ...rest] = received[0]!;
  assert.equal(hello?.workerId, "w-1");
  assert.match(hello?.incarnation ?? "", /^[0-9a-f]{32}$/);
  assert.deepEqual(rest.at(-1), { goodbye: true });
  assert.equal(received.length, 1);
});

test("a broken session is opened again under the same incarnation", async () => {
  const { executor, received } = sessions(1);
  const session = new WorkerSession(executor, "w-1");
  session.start();
  await eventually(() => received.length >= 2 && session.sessionId === "s2");
  await session.close();
  assert.equal(received[0]?.[0]?.incarnation, session.incarnation);
  assert.equal(received[1]?.[0]?.incarnation, session.incarnation);
});

test("a type whose spec the job service refuses is not run; the others are", async () => {
  const other = { ...textStats, spec: { ...textStats.spec, jobType: "other_stats" } };
  let unavailable = 1;
  const { executor, calls } = fakeExecutor({
    declareJobType: (request: { spec: { jobType: string } }) => {
      if (request.spec.jobType === "text_stats") throw refusal(Code.FailedPrecondition, "JOB_TYPE_SPEC_CONFLICT");
      if (unavailable-- > 0) throw refusal(Code.Unavailable, "");
      return { firstDeclaredBy: "w-0" };
    },
  });
  const declared = await declareJobTypes(executor, "w-1", [textStats, other], Date.now() + 5_000);
  assert.deepEqual([...declared.keys()], ["other_stats"]);
  // the conflict is not retried; the outage is
  assert.deepEqual(calls.map((call) => (call.request.spec as { jobType: string }).jobType), [
    "text_stats",
    "other_stats",
    "other_stats",
  ]);
  assert.equal(calls[0]?.request.workerId, "w-1");
});

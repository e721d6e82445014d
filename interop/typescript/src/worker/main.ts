/**
 * A worker written in TypeScript (issue 41): it runs job types whose code lives here only.
 * The job service runs no job type code: it knows each type by the spec this worker
 * declares, and checks inputs and outputs against its JSON Schemas.
 *
 * Start-up: the session (a random incarnation, pings), the job types declared, then one
 * intake per queue — work tokens fetched from JetStream, LockJobs, the job run under a
 * heartbeat, SubmitResult or SubmitFailure — and the cancel notices. SIGTERM or SIGINT:
 * a graceful shutdown (no new work; running jobs get JOBS_WORKER_SHUTDOWN_GRACE_S to
 * finish, then are handed back; the session ends with a goodbye). Exit status 2: invalid
 * configuration; 3: the job service or NATS unreachable, or no job type accepted.
 *
 * Environment (the Python worker's names): JOBS_JOB_SERVICE_TARGET, JOBS_NATS_URL,
 * JOBS_WORKER_ID, JOBS_AUTH_TOKEN or JOBS_AUTH_TOKEN_FILE, JOBS_WORKER_SHUTDOWN_GRACE_S,
 * JOBS_WORKER_FETCH_TIMEOUT_S; and the example `signoff`'s JOBS_SIGNOFF_LEDGER.
 */
import { CallPermits } from "./call_permits.js";
import { declareJobTypes } from "./declare.js";
import { connectNats, DispatchSource, listenForCancels } from "./dispatch.js";
import { QueueIntake } from "./intake.js";
import { definitionName, type JobType } from "./job_type.js";
import * as log from "./log.js";
import { Pipeline } from "./pipeline.js";
import { executorClient, pause } from "./rpc.js";
import { WorkerSession } from "./session.js";
import { ConfigError, settingsFrom } from "./settings.js";
import { signoff } from "./signoff.js";
import { textStats } from "./text_stats.js";

/** The job types this worker runs. */
const JOB_TYPES: readonly JobType[] = [textStats, signoff];
// The job service and NATS must be reachable within this at start-up.
const STARTUP_TIMEOUT_MS = 30_000;

async function main(): Promise<number> {
  let settings;
  try {
    settings = settingsFrom();
  } catch (caught) {
    if (!(caught instanceof ConfigError)) throw caught;
    log.error(`invalid configuration: ${caught.message}`);
    return 2;
  }
  const { workerId } = settings;
  const stopping = new AbortController();
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (stopping.signal.aborted) process.exit(1); // a second signal: now
      log.info("stopping", { worker_id: workerId, signal });
      stopping.abort();
    });
  }

  const executor = executorClient(settings.jobServiceUrl, settings.authToken);
  const session = new WorkerSession(executor, workerId);
  session.start();
  const opened = await Promise.race([
    session.registered.then(() => true),
    pause(STARTUP_TIMEOUT_MS, stopping.signal).then(() => false),
  ]);
  if (!opened) {
    await session.close();
    if (stopping.signal.aborted) return 0;
    log.error("the job service did not open a session in time", { target: settings.jobServiceUrl });
    return 3;
  }

  // after the session opens, before any lease
  const types = await declareJobTypes(executor, workerId, JOB_TYPES, Date.now() + STARTUP_TIMEOUT_MS);
  if (types.size === 0) {
    log.error("no job type declared: nothing to run", { worker_id: workerId });
    await session.close();
    return 3;
  }

  let nc;
  try {
    nc = await connectNats(settings.natsServers, workerId);
  } catch (caught) {
    log.error("NATS unreachable", { servers: settings.natsServers, error: log.described(caught) });
    await session.close();
    return 3;
  }
  const pipeline = new Pipeline(executor, types, new CallPermits(executor), workerId);
  await listenForCancels(nc, (jobId) => {
    if (pipeline.cancel(jobId)) log.info("cancelled by a cancel message", { job_id: jobId });
  });
  const runnable = [...types.values()].map((type) => definitionName(type.spec));
  const intakes: QueueIntake[] = [];
  for (const [queue, slots] of slotsPerQueue([...types.values()])) {
    const source = new DispatchSource(nc, queue);
    await source.declare();
    intakes.push(new QueueIntake(source, slots, executor, pipeline, workerId, runnable, settings.fetchTimeoutMs));
  }
  const running = intakes.map((intake) => intake.run());
  log.info("worker running", {
    worker_id: workerId,
    incarnation: session.incarnation,
    definitions: runnable,
    queues: Object.fromEntries(intakes.map((intake) => [intake.queue, intake.slots])),
  });

  await new Promise((resolve) => stopping.signal.addEventListener("abort", resolve, { once: true }));
  // stop intake -> wait for in-flight work up to the grace -> hand the rest back -> goodbye
  for (const intake of intakes) intake.stop();
  await Promise.all(running);
  const inFlight = () => Promise.all(intakes.flatMap((intake) => [...intake.inFlight]));
  const drained = await Promise.race([inFlight().then(() => true), pause(settings.shutdownGraceMs).then(() => false)]);
  if (!drained) {
    log.info("grace period over; handing jobs back", { worker_id: workerId, jobs: pipeline.shutdown() });
    await inFlight();
  }
  await session.close();
  await nc.drain();
  log.info("stopped", { worker_id: workerId });
  return 0;
}

/** Per queue, the jobs run at once: the sum of its types' concurrency. */
function slotsPerQueue(types: readonly JobType[]): Map<string, number> {
  const slots = new Map<string, number>();
  for (const { spec } of types) slots.set(spec.queue!, (slots.get(spec.queue!) ?? 0) + Math.max(1, spec.concurrency ?? 1));
  return slots;
}

main().then(
  (status) => process.exit(status),
  (caught: unknown) => {
    log.error("worker failed", { error: log.described(caught) });
    process.exit(1);
  },
);

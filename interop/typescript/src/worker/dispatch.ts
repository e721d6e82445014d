/**
 * NATS as the worker uses it, by the names shared/constants.py and shared/jetstream.py
 * give: the work tokens of each queue on the JetStream stream JOBS_DISPATCH (subject
 * jobs.dispatch.<queue>), fetched through the durable pull consumer workers-<queue> every
 * worker of the queue shares, whatever its language; and the cancel notices on core NATS
 * (jobs.control.cancel), which are not persisted: heartbeats are the backstop.
 */
import {
  AckPolicy,
  connect,
  type Consumer,
  DeliverPolicy,
  type JetStreamManager,
  type JsMsg,
  nanos,
  type NatsConnection,
  RetentionPolicy,
  StorageType,
} from "nats";

import * as log from "./log.js";

export const DISPATCH_STREAM = "JOBS_DISPATCH";
const DISPATCH_SUBJECT_PREFIX = "jobs.dispatch";
export const CANCEL_SUBJECT = "jobs.control.cancel";
// shared/jetstream.py: the dispatch stream's window for duplicate publishes, and how long
// a fetched token stays with a worker that neither acks nor naks it
const DUPLICATE_WINDOW_MS = 120_000;
const DISPATCH_ACK_WAIT_MS = 10_000;

export function dispatchSubject(queue: string): string {
  return `${DISPATCH_SUBJECT_PREFIX}.${queue}`;
}

/** The durable pull consumer every worker of a queue shares. */
export function dispatchConsumer(queue: string): string {
  return `workers-${queue}`;
}

export async function connectNats(servers: string[], workerId: string): Promise<NatsConnection> {
  return connect({ servers, name: `worker ${workerId}`, maxReconnectAttempts: -1 });
}

/** What a dispatch message says: "a job of this queue may be worked on" (a work token; the
 * job it names is a hint). Undefined when the message is malformed. */
export function parseDispatch(data: Uint8Array): { jobId: string } | undefined {
  const jobId = jobIdIn(data);
  return jobId === undefined ? undefined : { jobId };
}

/** The job a cancel notice names, or undefined. */
export function parseCancel(data: Uint8Array): string | undefined {
  return jobIdIn(data);
}

function jobIdIn(data: Uint8Array): string | undefined {
  try {
    const body: unknown = JSON.parse(new TextDecoder().decode(data));
    if (body === null || typeof body !== "object" || Array.isArray(body)) return undefined;
    const jobId = (body as Record<string, unknown>).job_id;
    return typeof jobId === "string" && jobId !== "" ? jobId : undefined;
  } catch {
    return undefined;
  }
}

/** One queue's dispatch consumer: declared as the Python worker declares it (the first
 * process up creates it; the config must match, or the server refuses the create). */
export class DispatchSource {
  private consumer: Consumer | undefined;

  constructor(
    private readonly nc: NatsConnection,
    readonly queue: string,
  ) {}

  async declare(): Promise<void> {
    const jsm = await this.nc.jetstreamManager();
    await ensureDispatchStream(jsm);
    const name = dispatchConsumer(this.queue);
    try {
      await jsm.consumers.add(DISPATCH_STREAM, {
        durable_name: name,
        filter_subject: dispatchSubject(this.queue),
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: nanos(DISPATCH_ACK_WAIT_MS),
        max_ack_pending: 20_000,
        max_waiting: 512,
      });
    } catch (caught) {
      // another version's config (a deployment in the middle of an upgrade): use it as it is
      await jsm.consumers.info(DISPATCH_STREAM, name);
      log.warn("dispatch consumer kept as declared elsewhere", { queue: this.queue, error: log.described(caught) });
    }
    this.consumer = await (await this.nc.jetstream()).consumers.get(DISPATCH_STREAM, name);
  }

  /** Up to `max` messages, each handed to `take` as it arrives, for at most `expiresMs`. */
  async fetch(max: number, expiresMs: number, take: (message: JsMsg) => void, stop: AbortSignal): Promise<void> {
    if (this.consumer === undefined) await this.declare();
    const close = new AbortController();
    try {
      const messages = await this.consumer!.fetch({ max_messages: max, expires: Math.max(1_000, expiresMs) });
      const closed = (): void => void messages.close();
      stop.addEventListener("abort", closed, { once: true, signal: close.signal });
      for await (const message of messages) take(message);
    } catch (caught) {
      // no one answers for the consumer (NATS lost its store, or the stream was deleted):
      // the next fetch declares it all again, or fetches would fail forever
      this.consumer = undefined;
      throw caught;
    } finally {
      close.abort(); // the stop listener
    }
  }
}

async function ensureDispatchStream(jsm: JetStreamManager): Promise<void> {
  try {
    await jsm.streams.info(DISPATCH_STREAM);
    return; // its replicas and limits are the job service's to choose
  } catch {
    // missing (a fresh NATS, or one that lost its store): create it as shared/jetstream.py does
  }
  try {
    await jsm.streams.add({
      name: DISPATCH_STREAM,
      subjects: [`${DISPATCH_SUBJECT_PREFIX}.>`],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      duplicate_window: nanos(DUPLICATE_WINDOW_MS),
      num_replicas: 1,
    });
  } catch (caught) {
    await jsm.streams.info(DISPATCH_STREAM); // created meanwhile by another process
    log.info("dispatch stream created meanwhile elsewhere", { error: log.described(caught) });
  }
}

/** Calls `onCancel(jobId)` for every cancel notice until the connection closes; resolves
 * once the subscription is live on the server (no notice is missed from then on). */
export async function listenForCancels(nc: NatsConnection, onCancel: (jobId: string) => void): Promise<void> {
  nc.subscribe(CANCEL_SUBJECT, {
    callback: (caught, message) => {
      if (caught !== null) return;
      const jobId = parseCancel(message.data);
      if (jobId === undefined) log.warn("ignoring a malformed cancel message");
      else onCancel(jobId);
    },
  });
  await nc.flush();
}

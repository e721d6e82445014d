/**
 * The worker's configuration, from the JOBS_* variables the Python worker reads
 * (worker_service/settings.py), so that one deployment's environment starts either.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

export interface Settings {
  /** host:port (plaintext) or a URL of the job service's gRPC server. */
  readonly jobServiceUrl: string;
  /** One NATS URL, or several comma-separated (the servers of a cluster). */
  readonly natsServers: string[];
  readonly workerId: string;
  /** A bearer token with the `worker` role. */
  readonly authToken: string;
  /** On SIGTERM, in-flight jobs get this long to finish before they are handed back. */
  readonly shutdownGraceMs: number;
  /** How long one fetch of dispatch messages waits; also bounds how long stopping takes. */
  readonly fetchTimeoutMs: number;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

export function settingsFrom(env: Env = process.env): Settings {
  const target = env.JOBS_JOB_SERVICE_TARGET || "127.0.0.1:50051";
  return {
    jobServiceUrl: target.includes("://") ? target : `http://${target}`,
    natsServers: (env.JOBS_NATS_URL || "nats://127.0.0.1:4222")
      .split(",")
      .map((url) => url.trim())
      .filter((url) => url !== ""),
    workerId: env.JOBS_WORKER_ID || `${hostname()}-${process.pid}`,
    authToken: tokenFrom(env),
    shutdownGraceMs: seconds(env, "JOBS_WORKER_SHUTDOWN_GRACE_S", 20) * 1000,
    fetchTimeoutMs: seconds(env, "JOBS_WORKER_FETCH_TIMEOUT_S", 1) * 1000,
  };
}

/** JOBS_AUTH_TOKEN or the file JOBS_AUTH_TOKEN_FILE names (a mounted Secret); never both. */
function tokenFrom(env: Env): string {
  const token = env.JOBS_AUTH_TOKEN ?? "";
  const file = env.JOBS_AUTH_TOKEN_FILE ?? "";
  if (token && file) throw new ConfigError("set JOBS_AUTH_TOKEN or JOBS_AUTH_TOKEN_FILE, not both");
  if (!token && !file) throw new ConfigError("set JOBS_AUTH_TOKEN_FILE or JOBS_AUTH_TOKEN (the worker role's token)");
  return file ? readFileSync(file, "utf8").trim() : token.trim();
}

function seconds(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new ConfigError(`${name}: expected seconds, got ${raw}`);
  return value;
}

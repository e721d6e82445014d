/** One JSON object per line on stdout: what operators (and the interop test) read. */

export type Fields = Record<string, unknown>;

export function info(message: string, fields: Fields = {}): void {
  write("info", message, fields);
}

export function warn(message: string, fields: Fields = {}): void {
  write("warning", message, fields);
}

export function error(message: string, fields: Fields = {}): void {
  write("error", message, fields);
}

function write(level: string, message: string, fields: Fields): void {
  const line = { time: new Date().toISOString(), level, message, ...fields };
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** A caught value's name and message, never its stack (operators read one line). */
export function described(caught: unknown): string {
  return caught instanceof Error ? `${caught.name}: ${caught.message}` : String(caught);
}

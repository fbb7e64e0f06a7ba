import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { freePort, portIsFree } from '../provision/local-ports.ts';

/**
 * Fixed local ports of `platform dev`, kept in `<stateDir>/ports.json` so that the kubeconfigs it
 * writes (which name `https://127.0.0.1:<port>`) stay valid across restarts. The first run picks
 * free ports; later runs reuse them, and pick a new one only when the old one is taken by
 * something else (the kubeconfigs are then rewritten by their owners).
 */

/** Where the tests and `platform dev` have always found them. */
export { freePort, portIsFree };

export type PortName = 'apiserver' | 'gateway';
export type StoredPorts = Partial<Record<PortName, number>>;

const isPort = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value > 0 && value < 65536;

/** The ports recorded in the file's text; anything unreadable counts as not recorded. Pure. */
export function parseStoredPorts(text: string | undefined): StoredPorts {
  if (text === undefined) return {};
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    return {};
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) return {};
  const ports: StoredPorts = {};
  for (const name of ['apiserver', 'gateway'] as const) {
    const value = (document as Record<string, unknown>)[name];
    if (isPort(value)) ports[name] = value;
  }
  return ports;
}

export interface PersistentPort {
  readonly port: number;
  /** Whether this is the port of an earlier run. */
  readonly reused: boolean;
  /** The earlier run's port, when it was taken and had to be replaced. */
  readonly replaced?: number;
}

/**
 * The port `name` had in an earlier run if it is free now, else a new free one; the choice is
 * recorded in `file`. Call it only once the processes of an earlier run are reaped.
 */
export async function persistentPort(
  file: string,
  name: PortName,
  isFree: (port: number) => Promise<boolean> = portIsFree,
  pickFree: () => Promise<number> = freePort,
): Promise<PersistentPort> {
  const stored = parseStoredPorts(existsSync(file) ? readFileSync(file, 'utf8') : undefined);
  const previous = stored[name];
  if (previous !== undefined && (await isFree(previous))) return { port: previous, reused: true };
  const port = await pickFree();
  writeFileSync(file, `${JSON.stringify({ ...stored, [name]: port }, null, 2)}\n`);
  return previous === undefined ? { port, reused: false } : { port, reused: false, replaced: previous };
}

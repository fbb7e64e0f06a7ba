import { existsSync, mkdirSync, readFileSync, renameSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ControlPlanePorts, PKI_KEYS } from './control-plane.ts';
import { freePort, portIsFree } from './local-ports.ts';
import type { SecretText } from './pki.ts';
import type { ProvisionedInstance } from './provisioner.ts';

/**
 * What the processes provisioner keeps on disk per instance, under
 * `<stateDir>/virtualclusters/<namespace>/<name>/`. One directory per instance, and in it the
 * instance's own etcd data: removing an instance is removing its directory, one instance's
 * storage is never readable through another's apiserver (no shared etcd, no key prefix to get
 * wrong), and a platform restart finds everything it needs here:
 *
 *   state.json   ports, whether it should run, its options (this file's `InstanceState`)
 *   owner        the id of the provisioner that supervises it now (the others stop restarting)
 *   pids.json    its running processes, so a later provisioner can end what an earlier one left
 *   pki/         the files of the `pki` Secret (mode 0600), as the components read them
 *   data/        etcd's data and what the components write (kept across sleeps)
 *   logs/        one log per component
 */

export interface InstanceState {
  readonly namespace: string;
  readonly name: string;
  readonly uid?: string;
  readonly ports: ControlPlanePorts;
  /** Whether it should run: false while asleep. */
  readonly running: boolean;
  readonly controllerManager: boolean;
}

export interface InstancePaths {
  readonly root: string;
  readonly stateFile: string;
  readonly ownerFile: string;
  /** The lock (instance-lock.ts) taking the instance over and acting as its owner are done under. */
  readonly lockFile: string;
  readonly pidFile: string;
  readonly pkiDir: string;
  readonly dataDir: string;
  readonly logsDir: string;
}

export function instancePaths(stateDir: string, instance: ProvisionedInstance): InstancePaths {
  const root = join(stateDir, 'virtualclusters', instance.namespace, instance.name);
  return {
    root,
    stateFile: join(root, 'state.json'),
    ownerFile: join(root, 'owner'),
    lockFile: join(root, 'owner.lock'),
    pidFile: join(root, 'pids.json'),
    pkiDir: join(root, 'pki'),
    dataDir: join(root, 'data'),
    logsDir: join(root, 'logs'),
  };
}

const isPort = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value > 0 && value < 65536;
const PORT_NAMES = ['apiServer', 'etcdClient', 'etcdPeer', 'controllerManager'] as const;

/** The state in a state file's text; undefined for anything unreadable. Pure. */
export function parseInstanceState(text: string | undefined): InstanceState | undefined {
  if (text === undefined) return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof doc !== 'object' || doc === null) return undefined;
  const { namespace, name, uid, ports, running, controllerManager } = doc as Record<string, unknown>;
  if (typeof namespace !== 'string' || typeof name !== 'string') return undefined;
  if (typeof running !== 'boolean' || typeof controllerManager !== 'boolean') return undefined;
  if (typeof ports !== 'object' || ports === null) return undefined;
  const recorded = ports as Record<string, unknown>;
  if (!PORT_NAMES.every((p) => isPort(recorded[p]))) return undefined;
  return {
    namespace,
    name,
    ...(typeof uid === 'string' ? { uid } : {}),
    ports: Object.fromEntries(PORT_NAMES.map((p) => [p, recorded[p]])) as unknown as ControlPlanePorts,
    running,
    controllerManager,
  };
}

export function readInstanceState(paths: InstancePaths): InstanceState | undefined {
  return parseInstanceState(existsSync(paths.stateFile) ? readFileSync(paths.stateFile, 'utf8') : undefined);
}

/** Written whole and renamed into place: a crash leaves the old state or the new, never half. */
export function writeInstanceState(paths: InstancePaths, state: InstanceState): void {
  mkdirSync(paths.root, { recursive: true });
  const temporary = `${paths.stateFile}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(state, null, 2)}\n`);
  renameSync(temporary, paths.stateFile);
}

/**
 * The recorded ports where each is still free (the endpoint stays where the admin kubeconfig
 * says), a new free one for each that is not or was never recorded. Call it once the instance's
 * own processes are ended, or its own ports count as taken.
 */
export async function choosePorts(
  recorded: ControlPlanePorts | undefined,
  isFree: (port: number) => Promise<boolean> = portIsFree,
  pickFree: () => Promise<number> = freePort,
): Promise<ControlPlanePorts> {
  const chosen: Partial<Record<(typeof PORT_NAMES)[number], number>> = {};
  const taken = new Set<number>();
  for (const name of PORT_NAMES) {
    const previous = recorded?.[name];
    let port =
      previous !== undefined && !taken.has(previous) && (await isFree(previous)) ? previous : undefined;
    while (port === undefined || taken.has(port)) port = await pickFree();
    taken.add(port);
    chosen[name] = port;
  }
  return chosen as ControlPlanePorts;
}

/** The `pki` Secret's files, owner-only, replaced whole (a component never reads half a file). */
export function writePkiFiles(dir: string, pki: SecretText): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const [key, text] of Object.entries(pki)) {
    const path = join(dir, key);
    writeFileSync(`${path}.tmp`, text, { mode: 0o600 });
    renameSync(`${path}.tmp`, path);
  }
}

/** The id of the provisioner that supervises the instance now. */
export function ownerOf(paths: InstancePaths): string | undefined {
  try {
    return readFileSync(paths.ownerFile, 'utf8');
  } catch {
    return undefined;
  }
}

/** The instance CA's certificate as written for its components. */
export function caOf(paths: InstancePaths): string | undefined {
  try {
    return readFileSync(join(paths.pkiDir, PKI_KEYS.caCert), 'utf8');
  } catch {
    return undefined;
  }
}

/** Removes `dir` if it is empty (an instance's namespace directory after its last instance). */
export function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // not empty, or gone
  }
}

import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeApi } from '../runtime/kube-api.ts';
import {
  ControlPlaneStartError,
  logTail,
  type ManagedProcess,
  PidFile,
  retryWhenPortTaken,
} from './child-processes.ts';
import { ComponentSupervisor, SupervisionLost } from './component-supervisor.ts';
import {
  type ComponentDescription,
  type ControlPlaneDescription,
  type ControlPlanePorts,
  describeControlPlane,
  PKI_KEYS,
  secretNameOf,
} from './control-plane.ts';
import { componentAnswers } from './health-probes.ts';
import { asInstanceOwner, takeOverInstance, withInstanceLock } from './instance-lock.ts';
import { deleteSecret, readSecretText, writeSecretText } from './instance-secrets.ts';
import {
  caOf,
  choosePorts,
  type InstancePaths,
  type InstanceState,
  instancePaths,
  ownerOf,
  readInstanceState,
  removeIfEmpty,
  writeInstanceState,
  writePkiFiles,
} from './instance-state.ts';
import { ensureInstancePki, type SecretText } from './pki.ts';
import { phaseOf } from './process-status.ts';
import type { ProvisionedInstance, Provisioner, ProvisionOptions, ProvisionStatus } from './provisioner.ts';

/**
 * The processes provisioner (`platform dev`, the embedded default): each virtual control plane
 * runs as supervised child processes of the operator, from the project's multicall control-plane
 * binary, with what control-plane.ts describes; its storage and state live in the instance's
 * directory (instance-state.ts). The processes die with the operator (child-processes.ts); a new
 * provisioner over the same state directory ends anything an earlier one left (its pid file) and
 * starts the instance again on `ensure` (or `resume`), over the same storage and, where still
 * free, the same ports.
 */

export interface ProcessesProvisionerOptions {
  /** The platform's state directory; instances live under `virtualclusters/` in it. */
  readonly stateDir: string;
  /** The multicall control-plane binary (src/dev/binaries.ts builds and finds it). */
  readonly binary: string;
  /** The host cluster, where the instance's Secrets are kept. */
  readonly api: KubeApi;
  /** How long each component may take to become ready (default 120 s). */
  readonly readyTimeoutMs?: number;
  readonly log?: (message: string) => void;
}

interface RunningInstance {
  readonly state: InstanceState;
  readonly description: ControlPlaneDescription;
  readonly supervisors: ComponentSupervisor[];
  readonly caPem: string;
}

const keyOf = (instance: ProvisionedInstance) => `${instance.namespace}/${instance.name}`;
const endpointOf = (ports: ControlPlanePorts) => `https://127.0.0.1:${ports.apiServer}`;

export class ProcessesProvisioner implements Provisioner {
  /** Written to each instance's `owner` file: an earlier provisioner's supervisors see it and stop. */
  readonly id = randomUUID();
  private readonly running = new Map<string, RunningInstance>();
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly readyTimeoutMs: number;
  private readonly log: (message: string) => void;

  constructor(private readonly options: ProcessesProvisionerOptions) {
    this.readyTimeoutMs = options.readyTimeoutMs ?? 120_000;
    this.log = options.log ?? (() => {});
  }

  /** Calls on one instance run one at a time, in order. */
  private serialized<T>(instance: ProvisionedInstance, work: () => Promise<T>): Promise<T> {
    const key = keyOf(instance);
    const previous = this.queues.get(key) ?? Promise.resolve();
    const next = previous.catch(() => {}).then(work);
    this.queues.set(key, next);
    // Forgotten once settled, either way: the caller handles a rejection of `next`; this
    // bookkeeping must not leave one of its own unhandled (that ends the operator's process).
    const forget = () => {
      if (this.queues.get(key) === next) this.queues.delete(key);
    };
    next.then(forget, forget);
    return next;
  }

  ensure(instance: ProvisionedInstance, options: ProvisionOptions): Promise<ProvisionStatus> {
    return this.serialized(instance, async () => {
      const paths = instancePaths(this.options.stateDir, instance);
      const current = this.running.get(keyOf(instance));
      // Still ours (no other provisioner took it over), the same instance, as asked, all alive: kept.
      const kept =
        current?.state.controllerManager === options.controllerManager &&
        this.owns(paths) &&
        (instance.uid === undefined || current.state.uid === instance.uid) &&
        current.supervisors.every((s) => s.running);
      if (current && kept) return this.probe(instance, current);
      if (current) await this.end(instance, current);
      mkdirSync(paths.root, { recursive: true });
      const reaped = this.takeOver(paths);
      if (reaped > 0) this.log(`${keyOf(instance)}: ended ${reaped} process(es) an earlier run left`);
      let recorded = readInstanceState(paths);
      if (recorded?.uid && instance.uid && recorded.uid !== instance.uid) {
        // A new instance of the same name: what is here is the deleted one's, never to be served to it.
        this.log(
          `${keyOf(instance)}: storage and PKI of an earlier instance of this name (uid ${recorded.uid}) removed`,
        );
        await this.deleteSecrets(instance);
        rmSync(paths.dataDir, { recursive: true, force: true });
        rmSync(paths.pkiDir, { recursive: true, force: true });
        recorded = undefined;
      }
      const ports = recorded?.ports;
      const running = await retryWhenPortTaken(() => this.start(instance, options, paths, ports));
      this.running.set(keyOf(instance), running);
      return this.probe(instance, running);
    });
  }

  /**
   * Starts every component in order, each once the one before it is ready. Each start asks the
   * `owner` file first (the supervisor's `mayRun`): one that another provisioner took over
   * meanwhile fails with `SupervisionLost` after ending what this one started.
   */
  private async start(
    instance: ProvisionedInstance,
    options: ProvisionOptions,
    paths: InstancePaths,
    recordedPorts: ControlPlanePorts | undefined,
  ): Promise<RunningInstance> {
    const ports = await choosePorts(recordedPorts);
    const uid = instance.uid ?? readInstanceState(paths)?.uid;
    const state: InstanceState = {
      namespace: instance.namespace,
      name: instance.name,
      ...(uid ? { uid } : {}),
      ports,
      running: true,
      controllerManager: options.controllerManager,
    };
    this.asOwner(instance, paths, () => writeInstanceState(paths, state));
    const pki = await this.ensureSecrets({ ...instance, ...(uid ? { uid } : {}) }, ports);
    this.asOwner(instance, paths, () => writePkiFiles(paths.pkiDir, pki));
    const description = describeControlPlane({
      namespace: instance.namespace,
      name: instance.name,
      ports,
      pkiDir: paths.pkiDir,
      dataDir: paths.dataDir,
      bindAddress: '127.0.0.1',
      controllerManager: options.controllerManager,
    });
    const running: RunningInstance = {
      state,
      description,
      supervisors: [],
      caPem: pki[PKI_KEYS.caCert] ?? '',
    };
    mkdirSync(paths.logsDir, { recursive: true });
    try {
      for (const component of description.components) {
        for (const dir of component.dataDirs) mkdirSync(dir, { recursive: true, mode: 0o700 });
        const supervisor = this.supervise(instance, paths, component, running);
        running.supervisors.push(supervisor);
        const process = await supervisor.start();
        await this.waitReady(process, component, running.caPem);
      }
    } catch (err) {
      await this.end(instance, running);
      throw err;
    }
    return running;
  }

  /** Whether this provisioner supervises the instance (its id is in the `owner` file). */
  private owns(paths: InstancePaths): boolean {
    return ownerOf(paths) === this.id;
  }

  private takeOver(paths: InstancePaths): number {
    return takeOverInstance(paths, this.id);
  }

  /** `section` as the instance's owner (under its lock); `SupervisionLost` when it is another's. */
  private asOwner<T>(instance: ProvisionedInstance, paths: InstancePaths, section: () => T): T {
    const done = asInstanceOwner(paths, this.id, section);
    if (!done.owner) throw new SupervisionLost(keyOf(instance));
    return done.result;
  }

  private supervise(
    instance: ProvisionedInstance,
    paths: InstancePaths,
    component: ComponentDescription,
    running: RunningInstance,
  ): ComponentSupervisor {
    const pidFile = new PidFile(paths.pidFile);
    return new ComponentSupervisor(
      {
        name: `${component.name} of ${keyOf(instance)}`,
        command: this.options.binary,
        args: [...component.argv],
        logPath: join(paths.logsDir, `${component.name}.log`),
      },
      {
        // The owner file decides: a provisioner that took the instance over (another replica
        // holding its Lease, ADR 0028) starts no more of its components and leaves the pid file,
        // now the new owner's, as that one wrote it.
        mayRun: () => this.owns(paths),
        // The check once a process is up and its adoption (the pid recorded) are one step under
        // the instance's lock, as a takeover's owner write and reaping are.
        exclusive: (section) => withInstanceLock(paths.lockFile, section),
        onStarted: () => {
          if (!this.owns(paths)) return;
          pidFile.record(
            running.supervisors
              .filter((s) => s.running && s.process)
              .map((s) => ({ pid: s.process!.pid, command: this.options.binary })),
          );
        },
        log: this.log,
      },
    );
  }

  private async deleteSecrets(instance: ProvisionedInstance): Promise<void> {
    for (const role of ['admin', 'pki'] as const)
      await deleteSecret(this.options.api, instance.namespace, secretNameOf(instance.name, role));
  }

  /** The `pki` and `admin` Secrets for these ports (made or kept), and the `pki` data. */
  private async ensureSecrets(instance: ProvisionedInstance, ports: ControlPlanePorts): Promise<SecretText> {
    const { api } = this.options;
    const names = { pki: secretNameOf(instance.name, 'pki'), admin: secretNameOf(instance.name, 'admin') };
    const existing = {
      pki: await readSecretText(api, instance.namespace, names.pki),
      admin: await readSecretText(api, instance.namespace, names.admin),
    };
    const made = await ensureInstancePki(existing, {
      namespace: instance.namespace,
      name: instance.name,
      endpoint: endpointOf(ports),
      apiServerPort: ports.apiServer,
    });
    if (made.plan.reasons.length > 0) this.log(`${keyOf(instance)}: PKI: ${made.plan.reasons.join('; ')}`);
    await writeSecretText(api, instance, names.pki, made.pki);
    await writeSecretText(api, instance, names.admin, made.admin);
    return made.pki;
  }

  /** Polls the component's probe; fails at once, with its log's tail, when its process ends. */
  private async waitReady(
    process: ManagedProcess,
    component: ComponentDescription,
    caPem: string,
  ): Promise<void> {
    const deadline = Date.now() + this.readyTimeoutMs;
    while (Date.now() < deadline) {
      if (!process.running) {
        const tail = await logTail(process.logPath);
        const portTaken = /address already in use/.test(tail);
        throw new ControlPlaneStartError(
          `${process.name} ${process.exitDescription} before it became ready`,
          tail,
          portTaken,
        );
      }
      if (await componentAnswers(component, caPem)) return;
      await sleep(250);
    }
    throw new ControlPlaneStartError(
      `${process.name} did not become ready within ${Math.round(this.readyTimeoutMs / 1000)}s`,
      await logTail(process.logPath),
    );
  }

  /** Ends the instance's processes, last component first; forgets it. */
  private async end(instance: ProvisionedInstance, running: RunningInstance): Promise<void> {
    for (const supervisor of [...running.supervisors].reverse()) await supervisor.stop();
    this.running.delete(keyOf(instance));
    // The pid file is the owner's: one that took the instance over keeps its records.
    const paths = instancePaths(this.options.stateDir, instance);
    if (existsSync(paths.root)) asInstanceOwner(paths, this.id, () => new PidFile(paths.pidFile).record([]));
  }

  stop(instance: ProvisionedInstance): Promise<void> {
    return this.serialized(instance, async () => {
      const paths = instancePaths(this.options.stateDir, instance);
      const current = this.running.get(keyOf(instance));
      if (current) await this.end(instance, current);
      if (!existsSync(paths.root)) return;
      this.takeOver(paths);
      this.asOwner(instance, paths, () => {
        const state = readInstanceState(paths);
        if (state) writeInstanceState(paths, { ...state, running: false });
      });
    });
  }

  remove(instance: ProvisionedInstance): Promise<void> {
    return this.serialized(instance, async () => {
      const paths = instancePaths(this.options.stateDir, instance);
      const current = this.running.get(keyOf(instance));
      if (current) await this.end(instance, current);
      if (existsSync(paths.root)) this.takeOver(paths);
      await this.deleteSecrets(instance);
      rmSync(paths.root, { recursive: true, force: true });
      removeIfEmpty(dirname(paths.root));
    });
  }

  status(instance: ProvisionedInstance): Promise<ProvisionStatus> {
    const current = this.running.get(keyOf(instance));
    if (current) return this.probe(instance, current);
    const paths = instancePaths(this.options.stateDir, instance);
    const state = readInstanceState(paths);
    if (!state) return Promise.resolve({ phase: 'Absent' });
    return Promise.resolve({
      ...reachOf(instance, state.ports, caOf(paths)),
      phase: 'Stopped',
      message: state.running ? 'not running in this process: ensure starts it' : 'asleep',
    });
  }

  /**
   * Starts every instance whose state says it should run (after a platform restart); returns
   * each one's status. One that fails is reported, the others still start.
   */
  async resume(): Promise<ProvisionStatus[]> {
    const root = join(this.options.stateDir, 'virtualclusters');
    const found: InstanceState[] = [];
    for (const namespace of existsSync(root) ? readdirSync(root) : []) {
      for (const name of readdirSync(join(root, namespace))) {
        const state = readInstanceState(instancePaths(this.options.stateDir, { namespace, name }));
        if (state?.running) found.push(state);
      }
    }
    const results: ProvisionStatus[] = [];
    for (const state of found) {
      const instance = {
        namespace: state.namespace,
        name: state.name,
        ...(state.uid ? { uid: state.uid } : {}),
      };
      try {
        results.push(await this.ensure(instance, { controllerManager: state.controllerManager }));
      } catch (err) {
        results.push({ phase: 'Failed', message: err instanceof Error ? err.message : String(err) });
      }
    }
    return results;
  }

  /** Ends every instance this provisioner runs (the operator's shutdown); their state stays. */
  async close(): Promise<void> {
    const all = [...this.running.values()];
    await Promise.all(all.map((r) => this.serialized(r.state, () => this.end(r.state, r))));
  }

  private async probe(instance: ProvisionedInstance, running: RunningInstance): Promise<ProvisionStatus> {
    const observed = await Promise.all(
      running.description.components.map(async (component, index) => {
        const supervisor = running.supervisors[index];
        const alive = supervisor?.running ?? false;
        return {
          name: component.name,
          running: alive,
          ready: alive && (await componentAnswers(component, running.caPem)),
          crashesInARow: supervisor?.crashesInARow ?? 0,
          lastExit: supervisor?.lastExit,
          logPath: supervisor?.spec.logPath ?? '',
        };
      }),
    );
    return { ...reachOf(instance, running.state.ports, running.caPem), ...phaseOf(observed) };
  }
}

function reachOf(instance: ProvisionedInstance, ports: ControlPlanePorts, caPem: string | undefined) {
  return {
    endpoint: endpointOf(ports),
    adminSecretName: secretNameOf(instance.name, 'admin'),
    ...(caPem ? { caData: Buffer.from(caPem).toString('base64') } : {}),
  };
}

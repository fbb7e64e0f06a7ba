/**
 * The processes provisioner (src/provision/processes.ts, what `platform dev` provisions virtual
 * clusters with) beside the same control plane spawned by hand, in one run, round after round:
 *
 * 1. Create to Ready: `ProcessesProvisioner.ensure` of a fresh instance (etcd, kube-apiserver,
 *    kube-controller-manager, as the VirtualClusterInstance controller asks), then its admin
 *    credential read from the instance's Secret on the host and `/readyz` answered 200 with it.
 *    Baseline: the very command lines the provisioner runs (`describeControlPlane`, one source),
 *    spawned by hand from the same binary over an empty data directory, each started once the one
 *    before it answers its probe (polled every 50 ms), until `/readyz` answers the same admin
 *    credential. The baseline's PKI files are made beforehand and not counted: what the
 *    provisioner adds is its PKI (timed alone too and printed), its Secrets on the host, its files
 *    and its supervision (its probes poll every 250 ms).
 * 2. Wake: the instance put to sleep (`stop`: its processes end, its storage stays), then `ensure`
 *    again until `/readyz` answers the admin credential (read anew from its Secret), and a
 *    ConfigMap made before the sleep is read back. Baseline: the hand-spawned processes stopped and
 *    spawned again over their kept data, until `/readyz`, the ConfigMap read back the same way.
 *    This is the control plane's side of a wake.
 * 3. Idle memory: the sum of VmRSS (/proc/<pid>/status) of the instance's processes, found by
 *    their command lines naming its directory, after it was Ready and a settle period; the same
 *    for the hand-spawned control plane.
 *
 * 4. The platform's side (platform.ts): the operator in this process (the virtualcluster
 *    controller with the processes provisioner, the gateway): a VirtualClusterInstance created on
 *    the host until `Ready=True`, beside the by-hand create of 1; and, the instance put to sleep,
 *    one GET through the access proxy with a person's key until its 200 answer (the gateway's wake
 *    request, the controller's start, the syncer, the relay), beside the by-hand wake of 2.
 *
 * Each round makes one of each, in alternating order (a shared machine's slow spells fall
 * on all alike), each measured while the others are not running; the figures are the medians over
 * the rounds, the ratios the medians of the per-round ratios, printed with their spread. A host
 * control plane of its own keeps the instances' Secrets. Every wait is bounded and fails when a
 * component died; every process and directory is removed, also when a round fails.
 *
 *   bench/provision/run.sh [ROUNDS=3] [SETTLE_SECONDS=30]     (BENCH_SMOKE=1: 1 round, 2 s)
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { processesNaming } from '../../e2e/support/instance-processes.ts';
import { ensureControlPlaneBinary } from '../../src/dev/binaries.ts';
import { ControlPlane } from '../../src/dev/controlplane.ts';
import { ControlPlaneStartError, logTail, ManagedProcess } from '../../src/provision/child-processes.ts';
import {
  ADMIN_KEYS,
  type ComponentDescription,
  type ComponentName,
  type ControlPlanePorts,
  describeControlPlane,
  PKI_KEYS,
  secretNameOf,
} from '../../src/provision/control-plane.ts';
import { httpOk, httpsOk } from '../../src/provision/health-probes.ts';
import { readSecretText } from '../../src/provision/instance-secrets.ts';
import { choosePorts, instancePaths, writePkiFiles } from '../../src/provision/instance-state.ts';
import { ensureInstancePki, type SecretText } from '../../src/provision/pki.ts';
import { ProcessesProvisioner } from '../../src/provision/processes.ts';
import type { ProvisionedInstance } from '../../src/provision/provisioner.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { benchMode, quantile, reportFigure, runBench, waitUntil, within } from '../support.ts';
import { BenchPlatform, type PlatformSample } from './platform.ts';

const smoke = benchMode() === 'smoke';
const ROUNDS = Number(process.argv[2] ?? (smoke ? 1 : 3));
const SETTLE_SECONDS = Number(process.argv[3] ?? (smoke ? 2 : 30));
/** The host namespace the instances (and the baseline's name) live in. */
const NAMESPACE = 'bench-provision';
const OPTIONS = { controllerManager: true };
const COMPONENTS: readonly ComponentName[] = ['etcd', 'kube-apiserver', 'kube-controller-manager'];
/** Far beyond a healthy start on a loaded machine: only a hang reaches these. */
const COMPONENT_BOUND_MS = 180_000;
const ENSURE_BOUND_MS = 5 * 60_000;
const READYZ_BOUND_MS = 60_000;
const BY_HAND_POLL_MS = 50;

/** What a client of the virtual cluster holds: its endpoint and the admin credential. */
interface AdminCredential {
  readonly endpoint: string;
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

const credentialOf = (endpoint: string, admin: SecretText): AdminCredential => {
  const [ca, cert, key] = [ADMIN_KEYS.caCert, ADMIN_KEYS.clientCert, ADMIN_KEYS.clientKey].map((k) => {
    const value = admin[k];
    if (!value) throw new Error(`the admin credential has no ${k}`);
    return value;
  });
  return { endpoint, ca: ca!, cert: cert!, key: key! };
};

/** One request to the virtual apiserver as its admin (CA-verified, client certificate). */
function adminRequest(
  credential: AdminCredential,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: string }> {
  const { endpoint, ca, cert, key } = credential;
  return new Promise((resolve, reject) => {
    const req = request(
      `${endpoint}${path}`,
      {
        method,
        ca,
        cert,
        key,
        timeout: 10_000,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 10 s`)));
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** Polls `/readyz` as the admin until it answers 200 `ok`; `alive` throws when a component died. */
async function readyzAnswers(credential: AdminCredential, alive: () => void): Promise<void> {
  await waitUntil(
    `/readyz of ${credential.endpoint} with the admin credential`,
    async () => {
      alive();
      const answer = await adminRequest(credential, 'GET', '/readyz').catch(() => undefined);
      return answer?.status === 200 && answer.body === 'ok';
    },
    { boundMs: READYZ_BOUND_MS, intervalMs: BY_HAND_POLL_MS },
  );
}

const KEPT = 'kept-across-sleep';

async function makeKeptConfigMap(credential: AdminCredential): Promise<void> {
  const made = await adminRequest(credential, 'POST', '/api/v1/namespaces/default/configmaps', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: KEPT },
    data: { made: 'before the sleep' },
  });
  if (made.status !== 201) throw new Error(`creating the ConfigMap: HTTP ${made.status} ${made.body}`);
}

async function expectKeptConfigMap(credential: AdminCredential, who: string): Promise<void> {
  const read = await adminRequest(credential, 'GET', `/api/v1/namespaces/default/configmaps/${KEPT}`);
  if (read.status !== 200)
    throw new Error(`${who}: the ConfigMap made before the sleep is gone (HTTP ${read.status})`);
}

/** Memory of a control plane's processes, in MiB, summed over them. */
interface Memory {
  /** VmRSS: what the figure is. Counts the binary's pages once per process (three share it). */
  readonly rss: number;
  /** RssAnon: the processes' own heaps and stacks. */
  readonly anon: number;
  /** RssFile: mapped files, mostly the one multicall binary's pages. */
  readonly file: number;
  /**
   * Pss (smaps_rollup): each shared page divided among the processes that map it, on the whole
   * machine (other control planes of the same binary take their share).
   */
  readonly pss: number;
  /** RssAnon of each component. */
  readonly anonOf: Readonly<Record<string, number>>;
}

const kibOf = (text: string, field: string, source: string): number => {
  const match = text.match(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm'));
  if (!match) throw new Error(`no ${field} in ${source}`);
  return Number(match[1]);
};

/** The memory of the control plane under `dir`: exactly one etcd, apiserver and controller manager. */
function memoryOf(dir: string): Memory {
  const processes = processesNaming(dir);
  const components = processes.map((p) => p.component).sort();
  if (components.join(',') !== [...COMPONENTS].sort().join(','))
    throw new Error(
      `expected one of each of ${COMPONENTS.join(', ')} under ${dir}, found ${components.join(', ')}`,
    );
  const kib = { rss: 0, anon: 0, file: 0, pss: 0 };
  const anonOf: Record<string, number> = {};
  for (const { pid, component } of processes) {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    kib.rss += kibOf(status, 'VmRSS', `/proc/${pid}/status`);
    const anon = kibOf(status, 'RssAnon', `/proc/${pid}/status`);
    kib.anon += anon;
    anonOf[component] = anon / 1024;
    kib.file += kibOf(status, 'RssFile', `/proc/${pid}/status`);
    kib.pss += kibOf(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'), 'Pss', `/proc/${pid}/smaps_rollup`);
  }
  return {
    rss: kib.rss / 1024,
    anon: kib.anon / 1024,
    file: kib.file / 1024,
    pss: kib.pss / 1024,
    anonOf,
  };
}

function probeOk(component: ComponentDescription, caPem: string): Promise<boolean> {
  const { scheme, host, port, path } = component.readiness;
  if (scheme === 'HTTP') return httpOk(`http://${host}:${port}${path}`);
  return httpsOk(
    `https://${host}:${port}${path}`,
    component.name === 'kube-apiserver' ? caPem : undefined,
    undefined,
  );
}

/**
 * The baseline: the provisioner's own command lines for a control plane, spawned by a person
 * from a shell, in order, each once the one before it answers, over PKI files made beforehand.
 */
class ByHand {
  private processes: ManagedProcess[] = [];
  private pki: { pki: SecretText; admin: SecretText } | undefined;
  private ports: ControlPlanePorts | undefined;
  readonly pkiDir: string;
  readonly dataDir: string;
  readonly logsDir: string;

  constructor(
    readonly root: string,
    private readonly binary: string,
  ) {
    this.pkiDir = join(root, 'pki');
    this.dataDir = join(root, 'data');
    this.logsDir = join(root, 'logs');
    mkdirSync(this.logsDir, { recursive: true });
  }

  /** Makes (or re-renders for new ports) the PKI files; returns the seconds `ensureInstancePki` took. */
  async prepare(recorded?: ControlPlanePorts): Promise<number> {
    const ports = await choosePorts(recorded);
    const began = performance.now();
    const made = await ensureInstancePki(this.pki ?? { pki: undefined, admin: undefined }, {
      namespace: NAMESPACE,
      name: 'by-hand',
      endpoint: `https://127.0.0.1:${ports.apiServer}`,
      apiServerPort: ports.apiServer,
    });
    const seconds = (performance.now() - began) / 1000;
    writePkiFiles(this.pkiDir, made.pki);
    this.pki = { pki: made.pki, admin: made.admin };
    this.ports = ports;
    return seconds;
  }

  get credential(): AdminCredential {
    if (!this.pki || !this.ports) throw new Error('prepare() first');
    return credentialOf(`https://127.0.0.1:${this.ports.apiServer}`, this.pki.admin);
  }

  get recordedPorts(): ControlPlanePorts | undefined {
    return this.ports;
  }

  /** Spawns etcd, kube-apiserver and kube-controller-manager in order, each waited for. */
  async start(): Promise<void> {
    if (!this.pki || !this.ports) throw new Error('prepare() first');
    const description = describeControlPlane({
      namespace: NAMESPACE,
      name: 'by-hand',
      ports: this.ports,
      pkiDir: this.pkiDir,
      dataDir: this.dataDir,
      bindAddress: '127.0.0.1',
      controllerManager: OPTIONS.controllerManager,
    });
    const caPem = this.pki.pki[PKI_KEYS.caCert] ?? '';
    for (const component of description.components) {
      for (const dir of component.dataDirs) mkdirSync(dir, { recursive: true, mode: 0o700 });
      const process = await ManagedProcess.start({
        name: `${component.name} (by hand)`,
        command: this.binary,
        args: [...component.argv],
        logPath: join(this.logsDir, `${component.name}.log`),
      });
      this.processes.push(process);
      await this.waitReady(process, component, caPem);
    }
  }

  private async waitReady(process: ManagedProcess, component: ComponentDescription, caPem: string) {
    const deadline = performance.now() + COMPONENT_BOUND_MS;
    for (;;) {
      if (!process.running) {
        const tail = await logTail(process.logPath);
        throw new ControlPlaneStartError(
          `${process.name} ${process.exitDescription} before it became ready`,
          tail,
          /address already in use/.test(tail),
        );
      }
      if (await probeOk(component, caPem)) return;
      if (performance.now() > deadline) {
        throw new ControlPlaneStartError(
          `${process.name} did not become ready within ${COMPONENT_BOUND_MS / 1000} s`,
          await logTail(process.logPath),
        );
      }
      await sleep(BY_HAND_POLL_MS);
    }
  }

  /** Throws when a process it started has ended. */
  assertAlive(): void {
    const ended = this.processes.find((p) => !p.running);
    if (ended) throw new Error(`${ended.name} ${ended.exitDescription}`);
  }

  /** Ends its processes, last started first. */
  async stop(): Promise<void> {
    for (const process of this.processes.reverse()) await process.stop();
    this.processes = [];
  }
}

interface Sample {
  /** Seconds from create to `/readyz` answering the admin credential. */
  readonly create: number;
  /** Seconds from asleep to `/readyz` answering again. */
  readonly wake: number;
  /** After Ready and the settle period. */
  readonly idle: Memory;
}

/** The baseline's round: create, settle, memory, sleep, wake; then everything removed. */
async function byHandRound(binary: string, root: string): Promise<Sample & { pkiSeconds: number }> {
  const byHand = new ByHand(root, binary);
  try {
    let pkiSeconds = 0;
    let create = 0;
    for (let attempt = 1; ; attempt++) {
      // Ports a moment ago free may be taken before a component binds them: pick again, as the
      // provisioner does (its retries are counted in its time; this is the floor).
      const seconds = await byHand.prepare();
      if (attempt === 1) pkiSeconds = seconds;
      const began = performance.now();
      try {
        await byHand.start();
        await readyzAnswers(byHand.credential, () => byHand.assertAlive());
        create = (performance.now() - began) / 1000;
        break;
      } catch (err) {
        await byHand.stop();
        if (!(err instanceof ControlPlaneStartError && err.portTaken) || attempt >= 3) throw err;
      }
    }
    await sleep(SETTLE_SECONDS * 1000);
    const idle = memoryOf(root);
    await makeKeptConfigMap(byHand.credential);
    await byHand.stop();
    if (processesNaming(root).length > 0) throw new Error('a process spawned by hand outlived its stop');
    // A restart keeps the ports where they are still free (as the provisioner does).
    await byHand.prepare(byHand.recordedPorts);
    const began = performance.now();
    await byHand.start();
    await readyzAnswers(byHand.credential, () => byHand.assertAlive());
    const wake = (performance.now() - began) / 1000;
    await expectKeptConfigMap(byHand.credential, 'by hand');
    return { create, wake, idle, pkiSeconds };
  } finally {
    await byHand.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

/** The provisioner's round, for a fresh instance: create, settle, memory, sleep, wake; then removed. */
async function provisionedRound(
  provisioner: ProcessesProvisioner,
  host: KubeClient,
  stateDir: string,
  instance: ProvisionedInstance,
): Promise<Sample> {
  const dir = instancePaths(stateDir, instance).root;
  const alive = () => {
    if (!processesNaming(dir).some((p) => p.component === 'kube-apiserver'))
      throw new Error(`the kube-apiserver of ${instance.namespace}/${instance.name} is not running`);
  };
  /** ensure, then the admin credential as a client reads it from the host, then /readyz with it. */
  const ensureUntilReadyz = async (what: string): Promise<AdminCredential> => {
    const status = await within(provisioner.ensure(instance, OPTIONS), what, { boundMs: ENSURE_BOUND_MS });
    if (status.phase !== 'Ready' || !status.endpoint)
      throw new Error(`${what}: ensure answered ${status.phase}: ${status.message ?? ''}`);
    const admin = await readSecretText(host, instance.namespace, secretNameOf(instance.name, 'admin'));
    if (!admin) throw new Error(`${what}: no admin Secret`);
    const credential = credentialOf(status.endpoint, admin);
    await readyzAnswers(credential, alive);
    return credential;
  };
  const measured = async (): Promise<Sample> => {
    let began = performance.now();
    const credential = await ensureUntilReadyz('create');
    const create = (performance.now() - began) / 1000;
    await sleep(SETTLE_SECONDS * 1000);
    const idle = memoryOf(dir);
    await makeKeptConfigMap(credential);
    await provisioner.stop(instance);
    if (processesNaming(dir).length > 0) throw new Error('a process of the instance outlived its sleep');
    began = performance.now();
    const woken = await ensureUntilReadyz('wake');
    const wake = (performance.now() - began) / 1000;
    await expectKeptConfigMap(woken, 'provisioned');
    return { create, wake, idle };
  };
  let sample: Sample;
  try {
    sample = await measured();
  } finally {
    await provisioner.remove(instance);
  }
  if (processesNaming(dir).length > 0 || existsSync(dir))
    throw new Error(`${instance.name}: a process or the directory of the instance outlived its removal`);
  return sample;
}

const memoryParts = (m: Memory) =>
  `anon ${m.anon.toFixed(1)}, file ${m.file.toFixed(1)}, Pss ${m.pss.toFixed(1)}`;
const median = (values: readonly number[]) => quantile(values, 0.5);
const spread = (values: readonly number[], digits: number) =>
  `${Math.min(...values).toFixed(digits)}-${Math.max(...values).toFixed(digits)}`;

async function main(): Promise<void> {
  const binary = await ensureControlPlaneBinary(() => {});
  const work = mkdtempSync(join(tmpdir(), 'platform-bench-provision-'));
  const plane = await ControlPlane.start({ stateDir: join(work, 'host'), binary });
  const stateDir = join(work, 'provisioned');
  let provisioner: ProcessesProvisioner | undefined;
  let host: KubeClient | undefined;
  let platform: BenchPlatform | undefined;
  try {
    const hostCluster = await plane.startCluster({ name: 'host' });
    const kc = new KubeConfig();
    kc.loadFromFile(hostCluster.kubeconfigPath);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    host = new KubeClient(kc);
    provisioner = new ProcessesProvisioner({ stateDir, binary, api: host });
    platform = await BenchPlatform.start(hostCluster.kubeconfigPath, binary, join(work, 'platform'));
    console.log(
      `provision benchmark: ${ROUNDS} round(s), settle ${SETTLE_SECONDS} s; etcd + kube-apiserver + kube-controller-manager from ${binary}`,
    );

    const ours: Sample[] = [];
    const byHand: (Sample & { pkiSeconds: number })[] = [];
    const controller: PlatformSample[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const instance = { namespace: NAMESPACE, name: `vc-${round}` };
      const runs = [
        async () => byHand.push(await byHandRound(binary, join(work, `by-hand-${round}`))),
        async () => ours.push(await provisionedRound(provisioner!, host!, stateDir, instance)),
        async () => controller.push(await platform!.round(`ctl-${round}`)),
      ];
      const byHandFirst = round % 2 === 1;
      for (const run of byHandFirst ? runs : runs.reverse()) await run();
      const [o, b, c] = [ours.at(-1)!, byHand.at(-1)!, controller.at(-1)!];
      console.log(
        `  round ${round} (${byHandFirst ? 'by hand first' : 'controller first'}): create ${o.create.toFixed(2)} s (controller to Ready ${c.createToReady.toFixed(2)} s) vs ${b.create.toFixed(2)} s by hand; wake ${o.wake.toFixed(2)} s (a request through the access proxy ${c.requestToAsleep.toFixed(2)} s) vs ${b.wake.toFixed(2)} s; idle VmRSS ${o.idle.rss.toFixed(1)} MiB vs ${b.idle.rss.toFixed(1)} MiB (${memoryParts(o.idle)} vs ${memoryParts(b.idle)}); its PKI alone ${b.pkiSeconds.toFixed(2)} s`,
      );
    }

    const figure = (
      name: string,
      pick: (s: Sample) => number,
      unit: string,
      baselineName: string,
      goal: string,
      digits: number,
      mineOf: () => number[] = () => ours.map(pick),
    ) => {
      const [mine, theirs] = [mineOf(), byHand.map(pick)];
      const ratios = mine.map((value, i) => value / theirs[i]!);
      reportFigure({
        name,
        value: median(mine),
        unit,
        baseline: { name: baselineName, value: median(theirs), unit },
        ratio: median(ratios),
        goal,
      });
      console.log(
        `    spread over ${ROUNDS} round(s): ours ${spread(mine, digits)} ${unit}, by hand ${spread(theirs, digits)} ${unit}, ratio ${spread(ratios, 3)}`,
      );
    };
    figure(
      'create to Ready: ensure of a fresh instance until /readyz answers its admin credential',
      (s) => s.create,
      's',
      'the same command lines spawned by hand, PKI made beforehand',
      '<= 1.2x (the provisioner adds its PKI, Secrets and files)',
      2,
    );
    console.log(
      `    the provisioner's added time (median of the per-round differences) ${median(ours.map((s, i) => s.create - byHand[i]!.create)).toFixed(2)} s; its PKI alone (ensureInstancePki: five RSA keys made one after another, four certificates signed) median ${median(byHand.map((s) => s.pkiSeconds)).toFixed(2)} s`,
    );
    figure(
      'wake: ensure of an asleep instance until /readyz answers its admin credential',
      (s) => s.wake,
      's',
      'the same processes spawned again by hand over their data',
      '<= 1.2x',
      2,
    );
    figure(
      'create to Ready, controller: a VirtualClusterInstance created on the host until Ready=True (processes provisioner)',
      (s) => s.create,
      's',
      'the same command lines spawned by hand, PKI made beforehand, until /readyz',
      '<= 1.5x (adds the watch, the Secrets, the syncer and its identity)',
      2,
      () => controller.map((c) => c.createToReady),
    );
    figure(
      'a request to an asleep instance: GET of a ConfigMap through the access proxy until its 200 answer',
      (s) => s.wake,
      's',
      'the same processes spawned again by hand over their data, until /readyz',
      '<= 1.5x (adds the wake request, the controller, the syncer and the relay)',
      2,
      () => controller.map((c) => c.requestToAsleep),
    );
    figure(
      `idle memory: VmRSS of an instance's processes, ${SETTLE_SECONDS} s after Ready`,
      (s) => s.idle.rss,
      'MiB',
      'the same processes spawned by hand',
      '<= 1.1x (the same processes with the same flags)',
      1,
    );
    const medianMemory = (samples: readonly Sample[]): Memory => ({
      rss: median(samples.map((s) => s.idle.rss)),
      anon: median(samples.map((s) => s.idle.anon)),
      file: median(samples.map((s) => s.idle.file)),
      pss: median(samples.map((s) => s.idle.pss)),
      anonOf: Object.fromEntries(
        COMPONENTS.map((c) => [c, median(samples.map((s) => s.idle.anonOf[c] ?? Number.NaN))]),
      ),
    });
    const perComponent = (m: Memory) =>
      COMPONENTS.map((c) => `${c} ${(m.anonOf[c] ?? Number.NaN).toFixed(1)}`).join(', ');
    console.log(
      `    medians of its parts: ours ${memoryParts(medianMemory(ours))} MiB; by hand ${memoryParts(medianMemory(byHand))} MiB (VmRSS counts the one binary's pages once per process; Pss divides them among every process on the machine that maps it)`,
    );
    console.log(
      `    RssAnon by component (medians): ours ${perComponent(medianMemory(ours))} MiB; by hand ${perComponent(medianMemory(byHand))} MiB`,
    );
  } finally {
    await platform?.stop();
    await provisioner?.close();
    host?.close();
    await plane.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

runBench(main);

// biome-ignore-all lint/suspicious/noExplicitAny: objects are read as loose JSON
import { API_GROUP, API_VERSION } from '../../../src/api/meta.ts';
import type { KubeClient } from '../../../src/runtime/kube-client.ts';
import { call } from '../../gateway/support.ts';
import {
  type EndpointsSpec,
  getOrNull,
  type ProjectSpec,
  type SecretSpec,
  sameProjectSpec,
  sameSecretSpec,
} from './expectations.ts';

const GV = `${API_GROUP}/${API_VERSION}`;
export const KEY_TTL_SECONDS = 86_400;
export const SECRET_PREFIX = 'ss-';
export const PROJECT_PREFIX = 'sp-';
export const KEY_PREFIX = 'sk-';

/** A small deterministic generator (mulberry32): the same seed gives the same sequence of operations. */
export class Rng {
  constructor(private state: number) {}
  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  some<T>(items: readonly T[], max: number): T[] {
    const count = 1 + this.int(max);
    return [...new Set(Array.from({ length: count }, () => this.pick(items)))].sort();
  }
}

/**
 * What the platform must hold at the end: the primary objects as the last acknowledged write
 * left them (an operation whose outcome was unclear, say during the restart, is settled by
 * reading the object back). The expected children are computed from these.
 */
export class SoakModel {
  /** `namespace/name` -> spec */
  readonly secrets = new Map<string, SecretSpec>();
  readonly projects = new Map<string, ProjectSpec>();
  readonly deletedProjects = new Set<string>();
  /** name -> plaintext (unknown when the answer that carried it was lost) */
  readonly keys = new Map<string, { plaintext?: string; ttl: number }>();
  /** Deleted keys whose plaintext we know: they must not authenticate any more. */
  readonly deletedKeys = new Map<string, string>();
  readonly endpoints = new Map<string, EndpointsSpec>();

  secretsIn(namespace: string): Map<string, SecretSpec> {
    const map = new Map<string, SecretSpec>();
    for (const [key, spec] of this.secrets) {
      const [ns, name] = key.split('/') as [string, string];
      if (ns === namespace) map.set(name, spec);
    }
    return map;
  }
}

export interface SoakTargets {
  admin: KubeClient;
  virtual: KubeClient;
  /** `<gateway>/kubernetes/management/apis/management.platform/v1` */
  gatewayApi: string;
  adminKey: string;
  aliceKey: string;
  secretNamespaces: readonly string[];
  virtualNamespace: string;
}

export interface OpOutcome {
  op: string;
  phase: string;
  /** When it started and ended (ms). */
  at: number;
  end: number;
  ok: boolean;
  detail?: string;
}

type Phase = () => string;

class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    text: string,
  ) {
    super(`HTTP ${status}: ${text.slice(0, 200)}`);
  }
}

const USERS = ['alice', 'bob', 'carol', 'dave'] as const;
const TEAMS = ['red', 'blue'] as const;
const VERBS = ['get', 'list', 'watch', 'update'] as const;
const TIERS = ['gold', 'silver', 'bronze'] as const;
const MEMBERS = [
  { kind: 'User', name: 'bob', clusterRole: 'view' },
  { kind: 'User', name: 'carol', clusterRole: 'edit' },
  { kind: 'Team', name: 'red', clusterRole: 'view' },
  { kind: 'User', name: '*', clusterRole: 'view' },
] as const;

/**
 * Populations: prefilled to the target before the load, then held around it (a create or delete
 * becomes a create with probability 0.5 + (target - count) / target, within [0.1, 0.9]), never
 * above 1.5 x.
 */
export const TARGET: Record<string, number> = { secret: 30, key: 8, project: 5, endpoints: 12 };

/** The operation mix, by weight. */
const MIX: Array<[string, number]> = [
  ['secret.create', 10],
  ['secret.update', 12],
  ['secret.delete', 7],
  ['key.create', 5],
  ['key.delete', 4],
  ['project.create', 3],
  ['project.update', 3],
  ['project.delete', 2],
  ['endpoints.create', 5],
  ['endpoints.update', 8],
  ['endpoints.delete', 4],
  ['gateway.get', 14],
  ['gateway.list', 8],
  ['gateway.keys', 4],
];
const TOTAL_WEIGHT = MIX.reduce((sum, [, w]) => sum + w, 0);

/**
 * A steady mix of creates, updates and deletes of SharedSecrets, OwnedAccessKeys (through the
 * gateway), Projects and virtual-cluster Services/Endpoints, with gateway reads, one operation per
 * `next()`. Operations on one object never overlap, so the model is exact; every outcome is kept.
 */
export class SoakLoad {
  readonly outcomes: OpOutcome[] = [];
  /** Acknowledged state the platform contradicted (a read-back or a gateway GET): must stay empty. */
  readonly anomalies: string[] = [];
  private readonly busy = new Set<string>();
  private sequence = 0;

  constructor(
    private readonly targets: SoakTargets,
    readonly model: SoakModel,
    private readonly rng: Rng,
    private readonly phase: Phase,
  ) {}

  /** Runs one operation of the mix. */
  async next(): Promise<void> {
    let roll = this.rng.int(TOTAL_WEIGHT);
    let op = MIX[0]![0];
    for (const [name, weight] of MIX) {
      if (roll < weight) {
        op = name;
        break;
      }
      roll -= weight;
    }
    await this.run(op);
  }

  /** Creates objects, `concurrency` at a time, until every population is at its target. */
  async prefill(concurrency = 8): Promise<void> {
    const counts = () => ({
      secret: this.model.secrets.size,
      key: this.model.keys.size,
      project: this.model.projects.size,
      endpoints: this.model.endpoints.size,
    });
    const missing = () =>
      Object.entries(TARGET).filter(
        ([kind, target]) => counts()[kind as keyof ReturnType<typeof counts>] < target,
      );
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let guard = 0; guard < 1000; guard++) {
          const todo = missing();
          if (todo.length === 0) return;
          await this.run(`${this.rng.pick(todo)[0]}.create`, true);
        }
      }),
    );
  }

  private count(kind: string): number | undefined {
    const m = this.model;
    return {
      secret: m.secrets.size,
      key: m.keys.size,
      project: m.projects.size,
      endpoints: m.endpoints.size,
    }[kind];
  }

  private async run(op: string, exact = false): Promise<void> {
    const [kind, action] = op.split('.') as [string, string];
    const count = this.count(kind);
    const target = TARGET[kind];
    let chosen = action;
    if (
      !exact &&
      count !== undefined &&
      target !== undefined &&
      (action === 'create' || action === 'delete')
    ) {
      const createProbability = Math.min(0.9, Math.max(0.1, 0.5 + (target - count) / target));
      chosen = count >= target * 1.5 ? 'delete' : this.rng.next() < createProbability ? 'create' : 'delete';
    }
    if (count === 0 && chosen !== 'create') chosen = 'create';
    const name = `${kind}.${chosen}`;
    const started = Date.now();
    const phase = this.phase();
    try {
      await this.dispatch(name);
      this.outcomes.push({ op: name, phase, at: started, end: Date.now(), ok: true });
    } catch (err) {
      this.outcomes.push({
        op: name,
        phase,
        at: started,
        end: Date.now(),
        ok: false,
        detail: (err as Error).message,
      });
    }
  }

  private dispatch(op: string): Promise<void> {
    switch (op) {
      case 'secret.create':
        return this.secretCreate();
      case 'secret.update':
        return this.secretUpdate();
      case 'secret.delete':
        return this.secretDelete();
      case 'key.create':
        return this.keyCreate();
      case 'key.delete':
        return this.keyDelete();
      case 'project.create':
        return this.projectCreate();
      case 'project.update':
        return this.projectUpdate();
      case 'project.delete':
        return this.projectDelete();
      case 'endpoints.create':
        return this.endpointsCreate();
      case 'endpoints.update':
        return this.endpointsUpdate();
      case 'endpoints.delete':
        return this.endpointsDelete();
      case 'gateway.get':
        return this.gatewayGet();
      case 'gateway.list':
        return this.gatewayList();
      default:
        return this.gatewayKeys();
    }
  }

  // --- helpers -------------------------------------------------------------------------------

  /** A random idle key of `map`, locked for the caller; undefined when every one is busy. */
  private lockIdle(prefix: string, keys: Iterable<string>): string | undefined {
    const idle = [...keys].filter((k) => !this.busy.has(`${prefix}:${k}`));
    if (idle.length === 0) return undefined;
    const key = this.rng.pick(idle);
    this.busy.add(`${prefix}:${key}`);
    return key;
  }

  private async locked(prefix: string, key: string, fn: () => Promise<void>): Promise<void> {
    this.busy.add(`${prefix}:${key}`);
    try {
      await fn();
    } finally {
      this.busy.delete(`${prefix}:${key}`);
    }
  }

  /** Runs `write`; if it fails, settles the model through `settle` (reading the truth back) and rethrows. */
  private async settled(write: () => Promise<void>, settle: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      try {
        await settle();
      } catch (settleErr) {
        this.anomalies.push(
          `could not settle after "${(err as Error).message}": ${(settleErr as Error).message}`,
        );
      }
      throw err;
    }
  }

  private async gateway(
    method: string,
    path: string,
    token: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<any> {
    const answer = await call(`${this.targets.gatewayApi}${path}`, {
      method,
      token,
      ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'Content-Type': contentType } } : {}),
    });
    if (answer.status >= 300) throw new HttpStatusError(answer.status, answer.text);
    return answer.json;
  }

  private secretSpec(): SecretSpec {
    const rules = 1 + this.rng.int(2);
    return {
      access: Array.from({ length: rules }, (_, i) => ({
        name: `r${i}`,
        verbs: this.rng.some(VERBS, 2),
        users: this.rng.some(USERS, 2),
        teams: this.rng.next() < 0.5 ? [] : this.rng.some(TEAMS, 1),
      })),
      data: { v: Buffer.from(`value-${this.sequence}-${this.rng.int(1e6)}`).toString('base64') },
    };
  }

  private secretPath(key: string): string {
    const [ns, name] = key.split('/') as [string, string];
    return `/apis/${GV}/namespaces/${ns}/sharedsecrets/${name}`;
  }

  // --- SharedSecrets -------------------------------------------------------------------------

  private secretCreate(): Promise<void> {
    const ns = this.rng.pick(this.targets.secretNamespaces);
    const name = `${SECRET_PREFIX}${++this.sequence}`;
    const key = `${ns}/${name}`;
    const spec = this.secretSpec();
    return this.locked('secret', key, () =>
      this.settled(
        async () => {
          await this.targets.admin.request({
            method: 'POST',
            path: `/apis/${GV}/namespaces/${ns}/sharedsecrets`,
            body: { apiVersion: GV, kind: 'SharedSecret', metadata: { name }, spec },
          });
          this.model.secrets.set(key, spec);
        },
        async () => {
          const current = await getOrNull(this.targets.admin, this.secretPath(key));
          if (!current) return;
          if (sameSecretSpec(current.spec, spec)) this.model.secrets.set(key, spec);
          else this.anomalies.push(`${key}: created with a spec that was never sent`);
        },
      ),
    );
  }

  private async secretUpdate(): Promise<void> {
    const key = this.lockIdle('secret', this.model.secrets.keys());
    if (!key) return;
    try {
      const before = this.model.secrets.get(key)!;
      const spec = this.secretSpec();
      const patch = [
        { op: 'replace', path: '/spec/access', value: spec.access },
        { op: 'replace', path: '/spec/data', value: spec.data },
      ];
      const viaGateway = this.rng.next() < 0.5;
      await this.settled(
        async () => {
          if (viaGateway) {
            const [ns, name] = key.split('/');
            await this.gateway(
              'PATCH',
              `/namespaces/${ns}/sharedsecrets/${name}`,
              this.targets.adminKey,
              patch,
              'application/json-patch+json',
            );
          } else {
            await this.targets.admin.request({
              method: 'PATCH',
              path: this.secretPath(key),
              body: patch,
              contentType: 'application/json-patch+json',
            });
          }
          this.model.secrets.set(key, spec);
        },
        async () => {
          const current = await getOrNull(this.targets.admin, this.secretPath(key));
          if (!current) this.anomalies.push(`${key}: vanished after a failed update`);
          else if (sameSecretSpec(current.spec, spec)) this.model.secrets.set(key, spec);
          else if (!sameSecretSpec(current.spec, before))
            this.anomalies.push(`${key}: neither old nor new spec`);
        },
      );
    } finally {
      this.busy.delete(`secret:${key}`);
    }
  }

  private async secretDelete(): Promise<void> {
    const key = this.lockIdle('secret', this.model.secrets.keys());
    if (!key) return;
    try {
      const viaGateway = this.rng.next() < 0.5;
      await this.settled(
        async () => {
          if (viaGateway) {
            const [ns, name] = key.split('/');
            await this.gateway('DELETE', `/namespaces/${ns}/sharedsecrets/${name}`, this.targets.adminKey);
          } else {
            await this.targets.admin.request({ method: 'DELETE', path: this.secretPath(key) });
          }
          this.model.secrets.delete(key);
        },
        async () => {
          const current = await getOrNull(this.targets.admin, this.secretPath(key));
          if (!current || current.metadata.deletionTimestamp) this.model.secrets.delete(key);
        },
      );
    } finally {
      this.busy.delete(`secret:${key}`);
    }
  }

  // --- OwnedAccessKeys through the gateway (alice's own) --------------------------------------

  private keyCreate(): Promise<void> {
    const name = `${KEY_PREFIX}${++this.sequence}`;
    return this.locked('key', name, () =>
      this.settled(
        async () => {
          const created = await this.gateway('POST', '/ownedaccesskeys', this.targets.aliceKey, {
            apiVersion: GV,
            kind: 'OwnedAccessKey',
            metadata: { name },
            spec: { displayName: name, ttl: KEY_TTL_SECONDS },
          });
          const plaintext = created?.spec?.key;
          if (typeof plaintext !== 'string') throw new Error(`no key in the answer for ${name}`);
          this.model.keys.set(name, { plaintext, ttl: KEY_TTL_SECONDS });
        },
        async () => {
          const current = await getOrNull(this.targets.admin, `/apis/${GV}/ownedaccesskeys/${name}`);
          if (current && !current.metadata.deletionTimestamp)
            this.model.keys.set(name, { ttl: KEY_TTL_SECONDS });
        },
      ),
    );
  }

  private async keyDelete(): Promise<void> {
    const name = this.lockIdle('key', this.model.keys.keys());
    if (!name) return;
    try {
      const { plaintext } = this.model.keys.get(name)!;
      const gone = () => {
        this.model.keys.delete(name);
        if (plaintext) this.model.deletedKeys.set(name, plaintext);
      };
      await this.settled(
        async () => {
          await this.gateway('DELETE', `/ownedaccesskeys/${name}`, this.targets.aliceKey);
          gone();
        },
        async () => {
          const current = await getOrNull(this.targets.admin, `/apis/${GV}/ownedaccesskeys/${name}`);
          if (!current || current.metadata.deletionTimestamp) gone();
        },
      );
    } finally {
      this.busy.delete(`key:${name}`);
    }
  }

  // --- Projects ------------------------------------------------------------------------------

  private projectSpec(): ProjectSpec {
    const count = this.rng.int(3);
    const members = [...new Set(Array.from({ length: count }, () => this.rng.int(MEMBERS.length)))]
      .sort()
      .map((i) => ({ ...MEMBERS[i]! }));
    return { owner: { user: this.rng.pick(USERS) }, members };
  }

  private projectCreate(): Promise<void> {
    const name = `${PROJECT_PREFIX}${++this.sequence}`;
    const spec = this.projectSpec();
    const path = `/apis/${GV}/projects/${name}`;
    return this.locked('project', name, () =>
      this.settled(
        async () => {
          await this.targets.admin.request({
            method: 'POST',
            path: `/apis/${GV}/projects`,
            body: { apiVersion: GV, kind: 'Project', metadata: { name }, spec },
          });
          this.model.projects.set(name, spec);
        },
        async () => {
          const current = await getOrNull(this.targets.admin, path);
          if (!current) return;
          if (sameProjectSpec(current.spec, spec)) this.model.projects.set(name, spec);
          else this.anomalies.push(`project ${name}: created with a spec that was never sent`);
        },
      ),
    );
  }

  private async projectUpdate(): Promise<void> {
    const name = this.lockIdle('project', this.model.projects.keys());
    if (!name) return;
    try {
      const before = this.model.projects.get(name)!;
      const spec = { ...before, members: this.projectSpec().members };
      const path = `/apis/${GV}/projects/${name}`;
      await this.settled(
        async () => {
          await this.targets.admin.request({
            method: 'PATCH',
            path,
            body: [{ op: 'add', path: '/spec/members', value: spec.members }],
            contentType: 'application/json-patch+json',
          });
          this.model.projects.set(name, spec);
        },
        async () => {
          const current = await getOrNull(this.targets.admin, path);
          if (!current) this.anomalies.push(`project ${name}: vanished after a failed update`);
          else if (sameProjectSpec(current.spec, spec)) this.model.projects.set(name, spec);
          else if (!sameProjectSpec(current.spec, before))
            this.anomalies.push(`project ${name}: neither old nor new spec`);
        },
      );
    } finally {
      this.busy.delete(`project:${name}`);
    }
  }

  private async projectDelete(): Promise<void> {
    const name = this.lockIdle('project', this.model.projects.keys());
    if (!name) return;
    try {
      const path = `/apis/${GV}/projects/${name}`;
      const gone = () => {
        this.model.projects.delete(name);
        this.model.deletedProjects.add(name);
      };
      await this.settled(
        async () => {
          await this.targets.admin.request({ method: 'DELETE', path });
          gone();
        },
        async () => {
          const current = await getOrNull(this.targets.admin, path);
          if (!current || current.metadata.deletionTimestamp) gone();
        },
      );
    } finally {
      this.busy.delete(`project:${name}`);
    }
  }

  // --- Services and Endpoints in the virtual cluster (synced to the host) --------------------

  private endpointsSpec(): EndpointsSpec {
    return {
      ip: `10.${1 + this.rng.int(200)}.${this.rng.int(250)}.${1 + this.rng.int(250)}`,
      tier: this.rng.pick(TIERS),
    };
  }

  private endpointsBody(name: string, spec: EndpointsSpec) {
    return {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name, annotations: { 'platform.test/tier': spec.tier } },
      subsets: [{ addresses: [{ ip: spec.ip }], ports: [{ name: 'p', port: 5432 }] }],
    };
  }

  private get virtualPath(): string {
    return `/api/v1/namespaces/${this.targets.virtualNamespace}`;
  }

  private endpointsCreate(): Promise<void> {
    const name = `ep-${++this.sequence}`;
    const spec = this.endpointsSpec();
    const { virtual } = this.targets;
    return this.locked('endpoints', name, () =>
      this.settled(
        async () => {
          await virtual.request({
            method: 'POST',
            path: `${this.virtualPath}/services`,
            body: {
              apiVersion: 'v1',
              kind: 'Service',
              metadata: { name },
              spec: { ports: [{ name: 'p', port: 5432 }] },
            },
          });
          await virtual.request({
            method: 'POST',
            path: `${this.virtualPath}/endpoints`,
            body: this.endpointsBody(name, spec),
          });
          this.model.endpoints.set(name, spec);
        },
        async () => {
          // Keep the pair whole: no Service without its Endpoints.
          const endpoints = await getOrNull(virtual, `${this.virtualPath}/endpoints/${name}`);
          if (endpoints) this.model.endpoints.set(name, spec);
          else
            await virtual
              .request({ method: 'DELETE', path: `${this.virtualPath}/services/${name}` })
              .catch(() => {});
        },
      ),
    );
  }

  private async endpointsUpdate(): Promise<void> {
    const name = this.lockIdle('endpoints', this.model.endpoints.keys());
    if (!name) return;
    try {
      const spec = this.endpointsSpec();
      await this.targets.virtual.request({
        method: 'PATCH',
        path: `${this.virtualPath}/endpoints/${name}`,
        body: this.endpointsBody(name, spec),
        contentType: 'application/merge-patch+json',
      });
      this.model.endpoints.set(name, spec);
    } finally {
      this.busy.delete(`endpoints:${name}`);
    }
  }

  private async endpointsDelete(): Promise<void> {
    const name = this.lockIdle('endpoints', this.model.endpoints.keys());
    if (!name) return;
    try {
      await this.targets.virtual.request({ method: 'DELETE', path: `${this.virtualPath}/endpoints/${name}` });
      this.model.endpoints.delete(name);
      await this.targets.virtual.request({ method: 'DELETE', path: `${this.virtualPath}/services/${name}` });
    } finally {
      this.busy.delete(`endpoints:${name}`);
    }
  }

  // --- gateway reads ---------------------------------------------------------------------------

  /** An admin GET of a SharedSecret through the gateway answers exactly the last acknowledged write. */
  private async gatewayGet(): Promise<void> {
    const key = this.lockIdle('secret', this.model.secrets.keys());
    if (!key) return this.gatewayList();
    try {
      const [ns, name] = key.split('/');
      const secret = await this.gateway(
        'GET',
        `/namespaces/${ns}/sharedsecrets/${name}`,
        this.targets.adminKey,
      );
      if (!sameSecretSpec(secret.spec, this.model.secrets.get(key)!))
        this.anomalies.push(`${key}: the gateway answered a spec other than the last acknowledged one`);
    } finally {
      this.busy.delete(`secret:${key}`);
    }
  }

  private async gatewayList(): Promise<void> {
    const ns = this.rng.pick(this.targets.secretNamespaces);
    const list = await this.gateway('GET', `/namespaces/${ns}/sharedsecrets`, this.targets.adminKey);
    if (!Array.isArray(list?.items)) throw new Error('LIST answered no items');
  }

  private async gatewayKeys(): Promise<void> {
    const keys = await this.gateway('GET', '/users/alice/accesskeys', this.targets.aliceKey);
    if (!Array.isArray(keys?.accessKeys)) throw new Error('no accessKeys in the answer');
  }
}

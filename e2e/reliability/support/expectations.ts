// biome-ignore-all lint/suspicious/noExplicitAny: objects are read as loose JSON
import type { V1RoleBinding } from '@kubernetes/client-node';
import { CLEANUP_FINALIZER, OWNER_UID_LABEL, PROJECT_LABEL } from '../../../src/api/labels.ts';
import { API_GROUP, API_VERSION } from '../../../src/api/meta.ts';
import { desiredProjectChildren } from '../../../src/controllers/project/desired.ts';
import { desiredRbac } from '../../../src/controllers/sharedsecret/desired.ts';
import { isNotFound } from '../../../src/runtime/errors.ts';
import type { KubeClient } from '../../../src/runtime/kube-client.ts';
import { hostNameLong, LABEL_MANAGED_BY } from '../../../src/sync/names.ts';
import { eventually } from '../../support/wait.ts';

const GV = `/apis/${API_GROUP}/${API_VERSION}`;
const RBAC = '/apis/rbac.authorization.k8s.io/v1';

const list = async (api: KubeClient, path: string, labelSelector?: string): Promise<any[]> =>
  (await api.request<{ items: any[] }>({ method: 'GET', path, query: { labelSelector } })).items;

export async function getOrNull(api: KubeClient, path: string): Promise<any | null> {
  try {
    return await api.request({ method: 'GET', path });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** The fields of a SharedSecret spec a test sets, in a canonical shape (server defaults aside). */
export function secretSpecOf(spec: any): SecretSpec {
  return {
    access: (spec?.access ?? []).map((rule: any) => ({
      ...(rule.name !== undefined ? { name: rule.name } : {}),
      verbs: rule.verbs ?? [],
      users: rule.users ?? [],
      teams: rule.teams ?? [],
    })),
    data: spec?.data ?? {},
  };
}

export const sameSecretSpec = (spec: any, want: SecretSpec): boolean =>
  same(secretSpecOf(spec), secretSpecOf(want));

/** The fields of a Project spec a test sets, in a canonical shape. */
export function projectSpecOf(spec: any): ProjectSpec {
  return {
    owner: { user: spec?.owner?.user },
    members: (spec?.members ?? []).map((m: any) => ({
      kind: m.kind,
      name: m.name,
      clusterRole: m.clusterRole,
    })),
  };
}

export const sameProjectSpec = (spec: any, want: ProjectSpec): boolean =>
  same(projectSpecOf(spec), projectSpecOf(want));
const sortedNames = (items: any[]) => items.map((i) => i.metadata.name as string).sort();
const readyFor = (obj: any) => {
  const ready = (obj.status?.conditions ?? []).find((c: any) => c.type === 'Ready');
  return (
    ready?.status === 'True' &&
    ready.observedGeneration === obj.metadata.generation &&
    obj.status?.observedGeneration === obj.metadata.generation
  );
};
const ruleOf = (rule: any) => ({
  apiGroups: rule?.apiGroups ?? [],
  resources: rule?.resources ?? [],
  resourceNames: rule?.resourceNames ?? [],
  verbs: rule?.verbs ?? [],
});
const subjectsOf = (binding: V1RoleBinding | any) =>
  (binding.subjects ?? []).map((s: any) => `${s.kind}/${s.name}`).join(',');

/** What a test expects of a SharedSecret's spec: its access rules and data. */
export interface SecretSpec {
  access: Array<{ name?: string; verbs: string[]; users?: string[]; teams?: string[] }>;
  data: Record<string, string>;
}

/**
 * The exact state of SharedSecrets in `namespace`, as a list of differences (empty: exact).
 * With `model`, the SharedSecrets themselves are exactly the model's (names and spec). Each has
 * no finalizer (its deletion never waits for the operator) and Ready=True for its generation; the projected Roles and RoleBindings are
 * exactly what `desiredRbac` says for them (rules, subjects, role, owner), none missing, no orphan.
 */
export async function sharedSecretDifferences(
  api: KubeClient,
  namespace: string,
  model?: ReadonlyMap<string, SecretSpec>,
): Promise<string[]> {
  const diffs: string[] = [];
  const [secrets, roles, bindings] = await Promise.all([
    list(api, `${GV}/namespaces/${namespace}/sharedsecrets`),
    list(api, `${RBAC}/namespaces/${namespace}/roles`, OWNER_UID_LABEL),
    list(api, `${RBAC}/namespaces/${namespace}/rolebindings`, OWNER_UID_LABEL),
  ]);
  if (model) {
    const want = [...model.keys()].sort();
    const have = sortedNames(secrets);
    if (!same(want, have)) {
      const missing = want.filter((n) => !have.includes(n));
      const extra = have.filter((n) => !want.includes(n));
      diffs.push(`${namespace}: SharedSecrets missing [${missing}] unexpected [${extra}]`);
    }
    for (const secret of secrets) {
      const spec = model.get(secret.metadata.name);
      if (!spec) continue;
      if (!sameSecretSpec(secret.spec, spec))
        diffs.push(`${namespace}/${secret.metadata.name}: spec differs from the last acknowledged write`);
    }
  }
  const wantedRoles = new Map<string, any>();
  const wantedBindings = new Map<string, any>();
  for (const secret of secrets) {
    const id = `${namespace}/${secret.metadata.name}`;
    if (secret.metadata.deletionTimestamp) {
      diffs.push(`${id} is still being deleted`);
      continue;
    }
    if (secret.metadata.finalizers?.includes(CLEANUP_FINALIZER)) diffs.push(`${id} has a finalizer`);
    if (!readyFor(secret)) diffs.push(`${id} is not Ready for generation ${secret.metadata.generation}`);
    const desired = desiredRbac(secret);
    for (const role of desired.roles) wantedRoles.set(role.metadata!.name!, role);
    for (const binding of desired.roleBindings) wantedBindings.set(binding.metadata!.name!, binding);
  }
  for (const role of roles) {
    const wanted = wantedRoles.get(role.metadata.name);
    if (!wanted) diffs.push(`orphan Role ${namespace}/${role.metadata.name}`);
    else if (
      role.metadata.ownerReferences?.[0]?.uid !== wanted.metadata.ownerReferences[0].uid ||
      !same(ruleOf(role.rules?.[0]), ruleOf(wanted.rules[0])) ||
      (role.rules ?? []).length !== 1
    )
      diffs.push(`Role ${namespace}/${role.metadata.name} differs`);
  }
  for (const name of wantedRoles.keys())
    if (!roles.some((r) => r.metadata.name === name)) diffs.push(`Role ${namespace}/${name} missing`);
  for (const binding of bindings) {
    const wanted = wantedBindings.get(binding.metadata.name);
    if (!wanted) diffs.push(`orphan RoleBinding ${namespace}/${binding.metadata.name}`);
    else if (
      binding.metadata.ownerReferences?.[0]?.uid !== wanted.metadata.ownerReferences[0].uid ||
      subjectsOf(binding) !== subjectsOf(wanted) ||
      binding.roleRef?.name !== wanted.roleRef.name
    )
      diffs.push(`RoleBinding ${namespace}/${binding.metadata.name} differs`);
  }
  for (const name of wantedBindings.keys())
    if (!bindings.some((b) => b.metadata.name === name))
      diffs.push(`RoleBinding ${namespace}/${name} missing`);
  return diffs;
}

export interface ProjectSpec {
  owner: { user: string };
  members: Array<{ kind: 'User' | 'Team'; name: string; clusterRole: string }>;
}

/**
 * Projects are exactly `model` (names under `prefix`, and spec); each is Ready for its generation
 * with its finalizer, its namespace `p-<name>` exists, labelled for it and not terminating, and the
 * member RoleBindings in it are exactly `desiredProjectChildren`'s. Projects in `deleted` are gone
 * and so are their namespaces.
 */
export async function projectDifferences(
  api: KubeClient,
  prefix: string,
  model: ReadonlyMap<string, ProjectSpec>,
  deleted: Iterable<string>,
): Promise<string[]> {
  const diffs: string[] = [];
  const projects = (await list(api, `${GV}/projects`)).filter((p) => p.metadata.name.startsWith(prefix));
  const want = [...model.keys()].sort();
  const have = sortedNames(projects);
  if (!same(want, have)) {
    const missing = want.filter((n) => !have.includes(n));
    const extra = have.filter((n) => !want.includes(n));
    diffs.push(`Projects missing [${missing}] unexpected [${extra}]`);
  }
  for (const project of projects) {
    const name = project.metadata.name as string;
    const spec = model.get(name);
    if (!spec) continue;
    if (!sameProjectSpec(project.spec, spec))
      diffs.push(`Project ${name}: spec differs from the last acknowledged write`);
    if (project.metadata.deletionTimestamp) diffs.push(`Project ${name} is being deleted`);
    if (!project.metadata.finalizers?.includes(CLEANUP_FINALIZER))
      diffs.push(`Project ${name} has no finalizer`);
    if (!readyFor(project))
      diffs.push(`Project ${name} is not Ready for generation ${project.metadata.generation}`);
    const nsName = `p-${name}`;
    if (project.status?.namespace !== nsName)
      diffs.push(`Project ${name}: status.namespace is ${project.status?.namespace}`);
    const ns = await getOrNull(api, `/api/v1/namespaces/${nsName}`);
    if (!ns || ns.metadata.deletionTimestamp || ns.metadata.labels?.[PROJECT_LABEL] !== name) {
      diffs.push(`Project ${name}: namespace ${nsName} missing, terminating or not labelled`);
      continue;
    }
    const desired = desiredProjectChildren(project, nsName).roleBindings;
    const bindings = await list(api, `${RBAC}/namespaces/${nsName}/rolebindings`, PROJECT_LABEL);
    if (!same(sortedNames(bindings), desired.map((b) => b.metadata!.name!).sort()))
      diffs.push(`Project ${name}: member RoleBindings ${sortedNames(bindings)} are not the desired ones`);
    for (const binding of bindings) {
      const wanted = desired.find((b) => b.metadata!.name === binding.metadata.name);
      if (
        wanted &&
        (subjectsOf(binding) !== subjectsOf(wanted) || binding.roleRef?.name !== wanted.roleRef.name)
      )
        diffs.push(`Project ${name}: RoleBinding ${binding.metadata.name} differs`);
    }
  }
  for (const name of deleted) {
    if (await getOrNull(api, `/api/v1/namespaces/p-${name}`))
      diffs.push(`deleted Project ${name}: its namespace remains`);
  }
  return diffs;
}

/** What a test expects of one virtual Endpoints: its address and the `tier` annotation. */
export interface EndpointsSpec {
  ip: string;
  tier: string;
}

/**
 * The virtual cluster's Endpoints in `virtualNamespace` are exactly `model`, and the syncer's host
 * objects in `hostNamespace` are exactly their translations: one host Endpoints and Service per
 * model entry (named by `hostNameLong`), with the model's address and the patched annotation
 * (`host-<tier>`), and no other host object managed for this virtual cluster.
 */
export async function endpointsDifferences(
  host: KubeClient,
  virtual: KubeClient,
  virtualNamespace: string,
  hostNamespace: string,
  vcluster: string,
  model: ReadonlyMap<string, EndpointsSpec>,
): Promise<string[]> {
  const diffs: string[] = [];
  const virtualEndpoints = await list(virtual, `/api/v1/namespaces/${virtualNamespace}/endpoints`);
  const want = [...model.keys()].sort();
  if (!same(sortedNames(virtualEndpoints), want)) diffs.push('virtual Endpoints differ from the model');
  const selector = `${LABEL_MANAGED_BY}=${vcluster}`;
  const [hostEndpoints, hostServices] = await Promise.all([
    list(host, `/api/v1/namespaces/${hostNamespace}/endpoints`, selector),
    list(host, `/api/v1/namespaces/${hostNamespace}/services`, selector),
  ]);
  const wantHost = want.map((name) => hostNameLong(name, virtualNamespace, vcluster)).sort();
  if (!same(sortedNames(hostEndpoints), wantHost)) {
    const have = sortedNames(hostEndpoints);
    diffs.push(
      `host Endpoints: missing [${wantHost.filter((n) => !have.includes(n))}] extra [${have.filter((n) => !wantHost.includes(n))}]`,
    );
  }
  if (!same(sortedNames(hostServices), wantHost)) diffs.push('host Services differ from the model');
  for (const [name, spec] of model) {
    const hostName = hostNameLong(name, virtualNamespace, vcluster);
    const endpoints = hostEndpoints.find((e) => e.metadata.name === hostName);
    if (!endpoints) continue;
    const ip = endpoints.subsets?.[0]?.addresses?.[0]?.ip;
    if (ip !== spec.ip) diffs.push(`host Endpoints ${hostName}: address ${ip}, want ${spec.ip}`);
    const tier = endpoints.metadata.annotations?.['platform.test/tier'];
    if (tier !== `host-${spec.tier}`)
      diffs.push(`host Endpoints ${hostName}: tier ${tier}, want host-${spec.tier}`);
  }
  return diffs;
}

/**
 * OwnedAccessKeys named under `prefix` are exactly `model`; each is stored with its keyed hash
 * only (never the plaintext), and the access key controller recorded its expiry (creation + ttl).
 */
export async function keyDifferences(
  api: KubeClient,
  prefix: string,
  model: ReadonlyMap<string, { ttl: number }>,
): Promise<string[]> {
  const diffs: string[] = [];
  const keys = (await list(api, `${GV}/ownedaccesskeys`)).filter((k) => k.metadata.name.startsWith(prefix));
  const want = [...model.keys()].sort();
  const have = sortedNames(keys);
  if (!same(want, have)) {
    const missing = want.filter((n) => !have.includes(n));
    const extra = have.filter((n) => !want.includes(n));
    diffs.push(`OwnedAccessKeys missing [${missing}] unexpected [${extra}]`);
  }
  for (const key of keys) {
    const name = key.metadata.name as string;
    const wanted = model.get(name);
    if (!wanted) continue;
    if (key.spec.key !== undefined || !/^[a-f0-9]{64}$/.test(key.spec.keyHash ?? ''))
      diffs.push(`OwnedAccessKey ${name} is not stored as a hash only`);
    const expiry = new Date(Date.parse(key.metadata.creationTimestamp) + wanted.ttl * 1000).toISOString();
    if (
      key.status?.expirationTimestamp === undefined ||
      Date.parse(key.status.expirationTimestamp) !== Date.parse(expiry)
    )
      diffs.push(
        `OwnedAccessKey ${name}: expirationTimestamp ${key.status?.expirationTimestamp}, want ${expiry}`,
      );
  }
  return diffs;
}

/** Polls `differences` until it is empty; the error names what still differs. */
export async function converge(
  differences: () => Promise<string[]>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  let last: string[] = [];
  await eventually(
    async () => {
      last = await differences().catch((err: Error) => [`(reading failed: ${err.message})`]);
      return last.length === 0;
    },
    timeoutMs,
    what,
  ).catch((err: Error) => {
    throw new Error(`${err.message}:\n  ${last.slice(0, 20).join('\n  ')}`);
  });
}

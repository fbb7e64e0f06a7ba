import { Command } from 'commander';
import { stringify as stringifyYaml } from 'yaml';
import type { Cluster } from '../api/cluster.ts';
import type { Project } from '../api/project.ts';
import { resources } from '../api/resources.ts';
import type { VirtualClusterInstance } from '../api/virtualclusterinstance.ts';
import { accessProxyPath, accessProxyServer, type KubeConfigProxyTarget } from '../clusters/kubeconfig.ts';
import { BASE_PATH } from '../gateway/paths.ts';
import { collectionPath, type ObjectList, objectPath } from '../runtime/kube-client.ts';
import { kubeconfigPath, readKubeconfig, writeKubeconfig } from './login/login-context.ts';
import { managementClient, type PlatformContext } from './management-client.ts';

export type { PlatformContext } from './management-client.ts';

/**
 * `platform kubeconfig`: one kubeconfig context per connected cluster and per virtual cluster the
 * person may reach, all through the platform's access proxy (`/kubernetes/cluster/<c>`,
 * `/kubernetes/project/<p>/virtualcluster/<v>` on the gateway), with the key of a platform context
 * (the one `platform login` writes, or any context whose server is the management API).
 *
 * The contexts use that context's own user entry (the key itself, never a copy or a new key): the
 * key's scope decides what each context may do, and signing out (or a new sign-in into the same
 * context) ends (or renews) them all at once. They are marked with a `platform.kubeconfig`
 * extension naming the platform context; a later run replaces those it made for that context and
 * removes those whose cluster is no longer listed. Other contexts, clusters and users, and the
 * current context, are left as they are.
 */

type Kubeconfig = NonNullable<ReturnType<typeof readKubeconfig>>;
type NamedEntry = { name: string; context: Record<string, unknown> };

/** The extension that marks a context this command wrote, with the platform context it came from. */
export const PROXY_CONTEXT_EXTENSION = 'platform.kubeconfig';

/** The platform context `name` (default: the current one) of a kubeconfig; throws when it is none. */
export function platformContextOf(config: Kubeconfig | undefined, name?: string): PlatformContext {
  const contextName = name ?? config?.['current-context'];
  const context = config?.contexts?.find((entry) => entry.name === contextName)?.context;
  if (!config || !contextName || !context) throw new Error(`no kubeconfig context "${contextName ?? ''}"`);
  const cluster = config.clusters?.find((entry) => entry.name === context.cluster)?.cluster;
  const server = cluster?.server;
  const managementSuffix = new RegExp(`${BASE_PATH}/*$`);
  if (typeof server !== 'string' || !managementSuffix.test(server))
    throw new Error(
      `context "${contextName}" does not point at the platform's management API (a server ending in ${BASE_PATH}); use the context platform login wrote`,
    );
  if (typeof context.user !== 'string' || !config.users?.some((entry) => entry.name === context.user))
    throw new Error(`context "${contextName}" has no user entry (the platform key)`);
  const { server: _server, extensions: _extensions, ...connection } = cluster as Record<string, unknown>;
  return {
    name: contextName,
    user: context.user,
    gatewayBase: server.replace(managementSuffix, ''),
    connection,
  };
}

/**
 * A target's context name: `<platform context>_cluster_<cluster>`,
 * `<platform context>_vcluster_<project>_<virtual cluster>` (object names hold no `_`, so the
 * parts cannot run into each other).
 */
export function proxyContextName(platform: string, target: KubeConfigProxyTarget): string {
  return target.kind === 'Cluster'
    ? `${platform}_cluster_${target.cluster}`
    : `${platform}_vcluster_${target.project}_${target.virtualCluster}`;
}

const madeFrom = (entry: NamedEntry): unknown =>
  (entry.context.extensions as { name?: string; extension?: { context?: unknown } }[] | undefined)?.find(
    (extension) => extension.name === PROXY_CONTEXT_EXTENSION,
  )?.extension?.context;

/**
 * The kubeconfig with a context (and a cluster of the same name) per target, using the platform
 * context's user; the contexts this command made earlier from the same platform context and not
 * among `targets` are removed with their clusters. Nothing else changes, `current-context` included.
 */
export function withProxyContexts(
  config: Kubeconfig,
  platform: PlatformContext,
  targets: readonly KubeConfigProxyTarget[],
): Kubeconfig {
  const generated = targets.map((target) => proxyEntries(platform, target));
  const names = new Set(generated.map((entry) => entry.context.name));
  const ours = (entry: NamedEntry) => madeFrom(entry) === platform.name;
  const removed = new Set(
    (config.contexts ?? [])
      .filter((entry) => ours(entry) && !names.has(entry.name))
      .map((entry) => entry.name),
  );
  const replaced = (name: string) => names.has(name) || removed.has(name);
  return {
    ...config,
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      ...(config.clusters ?? []).filter((entry) => !replaced(entry.name)),
      ...generated.map((entry) => entry.cluster),
    ],
    contexts: [
      ...(config.contexts ?? []).filter((entry) => !replaced(entry.name)),
      ...generated.map((entry) => entry.context),
    ],
  };
}

/** Only the targets' contexts, their clusters and the user they use: a kubeconfig of its own (`--dry-run`). */
export function proxyContextsAlone(
  config: Kubeconfig,
  platform: PlatformContext,
  targets: readonly KubeConfigProxyTarget[],
): Kubeconfig {
  const user = config.users?.find((entry) => entry.name === platform.user);
  return {
    ...withProxyContexts({}, platform, targets),
    users: user ? [user] : [],
    preferences: {},
  };
}

function proxyEntries(platform: PlatformContext, target: KubeConfigProxyTarget) {
  const name = proxyContextName(platform.name, target);
  return {
    cluster: {
      name,
      cluster: { ...platform.connection, server: accessProxyServer(platform.gatewayBase, target) },
    },
    context: {
      name,
      context: {
        cluster: name,
        user: platform.user,
        extensions: [
          {
            name: PROXY_CONTEXT_EXTENSION,
            extension: { context: platform.name, target: accessProxyPath(target) },
          },
        ],
      },
    },
  };
}

/** What the key could not list: said on stderr, the run goes on without it. */
type Skipped = (what: string, code: number) => void;

/** A GET of the management API (a path under `/kubernetes/management`) as the platform context. */
export type ManagementGet = (path: string) => Promise<{ status: number; body: unknown }>;

/** The items at `path`, or `undefined` when the key may not list them (403) or the platform serves none (404). */
async function listOrSkip<T>(get: ManagementGet, path: string, what: string, skipped: Skipped) {
  const item = await getOrSkip<ObjectList<T>>(get, path, what, skipped);
  return item?.items;
}

async function getOrSkip<T>(get: ManagementGet, path: string, what: string, skipped: Skipped) {
  const answer = await get(path);
  if (answer.status === 200) return answer.body as T;
  if (answer.status === 403 || answer.status === 404) {
    skipped(what, answer.status);
    return undefined;
  }
  if (answer.status === 401) throw new Error('the platform refused the key (401): sign in again');
  const message = (answer.body as { message?: unknown } | undefined)?.message;
  throw new Error(
    `GET ${path}: the platform answered ${answer.status}${typeof message === 'string' ? `: ${message}` : ''}`,
  );
}

/** The projects asked for (each read alone), or every project the key may list. */
async function readableProjects(
  get: ManagementGet,
  asked: readonly string[],
  skipped: Skipped,
): Promise<readonly Project[]> {
  if (asked.length === 0)
    return (await listOrSkip<Project>(get, collectionPath(resources.projects), 'projects', skipped)) ?? [];
  const read = await Promise.all(
    asked.map((name) =>
      getOrSkip<Project>(get, objectPath(resources.projects, undefined, name), `project ${name}`, skipped),
    ),
  );
  return read.filter((project) => project !== undefined);
}

/**
 * The clusters and virtual clusters the key may list through the management API, sorted. A
 * virtual cluster's project is the readable Project whose recorded namespace holds it (a project
 * whose namespace is not made yet has none); instances are listed across namespaces when the key
 * may, else per project namespace.
 */
export async function reachableTargets(
  get: ManagementGet,
  askedProjects: readonly string[],
  skipped: Skipped,
): Promise<KubeConfigProxyTarget[]> {
  const clusters = await listOrSkip<Cluster>(get, collectionPath(resources.clusters), 'clusters', skipped);
  const projectOf = new Map<string, string>();
  for (const project of await readableProjects(get, askedProjects, skipped)) {
    if (project.status?.namespace && project.metadata.name)
      projectOf.set(project.status.namespace, project.metadata.name);
  }
  const instancesPath = collectionPath(resources.virtualClusterInstances);
  let instances: readonly VirtualClusterInstance[] | undefined;
  if (askedProjects.length === 0)
    instances = await listOrSkip(get, instancesPath, 'virtual clusters', () => {});
  if (instances === undefined) {
    const perNamespace = await Promise.all(
      [...projectOf].map(([namespace, project]) =>
        listOrSkip<VirtualClusterInstance>(
          get,
          collectionPath(resources.virtualClusterInstances, namespace),
          `virtual clusters of project ${project}`,
          skipped,
        ),
      ),
    );
    instances = perNamespace.flatMap((list) => list ?? []);
  }
  const targets: KubeConfigProxyTarget[] = (clusters ?? []).map((cluster) => ({
    kind: 'Cluster',
    cluster: cluster.metadata.name ?? '',
  }));
  for (const instance of instances) {
    const project = projectOf.get(instance.metadata.namespace ?? '');
    if (project && instance.metadata.name)
      targets.push({ kind: 'ProjectVirtualCluster', project, virtualCluster: instance.metadata.name });
  }
  const order = (target: KubeConfigProxyTarget) => proxyContextName('', target);
  return targets.sort((a, b) => order(a).localeCompare(order(b)));
}

export function kubeconfigCommand(): Command {
  return new Command('kubeconfig')
    .description(
      "Add a kubeconfig context per cluster and virtual cluster the platform key may list, through the platform's access proxy",
    )
    .option(
      '--kubeconfig <path>',
      'kubeconfig to read the platform context from and write (default $KUBECONFIG or ~/.kube/config)',
    )
    .option('--context <name>', 'the platform context whose server and key to use (default the current one)')
    .option(
      '--project <name...>',
      'look for virtual clusters in these projects only (default: every project the key may list)',
    )
    .option('--dry-run', 'print the contexts as a kubeconfig of their own on stdout; write nothing')
    .action(
      async (options: { kubeconfig?: string; context?: string; project?: string[]; dryRun?: boolean }) => {
        const path = kubeconfigPath(options.kubeconfig);
        const config = readKubeconfig(path);
        const platform = platformContextOf(config, options.context);
        const management = managementClient(config ?? {}, platform);
        const get: ManagementGet = (path) => management.request('GET', path);
        const skipped: Skipped = (what, code) =>
          process.stderr.write(`Skipped ${what}: the platform answered ${code} (not allowed for this key)\n`);
        let targets: KubeConfigProxyTarget[];
        try {
          targets = await reachableTargets(get, options.project ?? [], skipped);
        } finally {
          await management.close();
        }
        if (options.dryRun) {
          process.stdout.write(stringifyYaml(proxyContextsAlone(config ?? {}, platform, targets)));
          return;
        }
        writeKubeconfig(path, withProxyContexts(config ?? {}, platform, targets));
        const names = targets.map((target) => `  ${proxyContextName(platform.name, target)}\n`).join('');
        process.stderr.write(`${targets.length} contexts through the platform in ${path}:\n${names}`);
      },
    );
}

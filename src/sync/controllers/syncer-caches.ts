import type { KubernetesObject } from '@kubernetes/client-node';
import type { Cluster } from '../../runtime/cluster.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { ResourceRef } from '../../runtime/kube-client.ts';
import { commonIndexers, type IndexFunc, NamespaceIndex } from '../../runtime/store.ts';
import { LABEL_MANAGED_BY } from '../names.ts';
import { namespaceRules } from '../object-refs.ts';
import type { HostToVirtualLookup } from '../patches/reference-patches.ts';
import type { KubeObject, SyncContext } from '../sync-context.ts';
import type { SyncedKind } from '../translate.ts';
import {
  HOST_NAME_INDEX,
  hasReferencePatches,
  hostNameIndexValue,
  hostNameIndexValues,
  REFERENCES_INDEX,
  referencedKinds,
  referenceIndexValue,
  referencesOf,
  SELECTOR_REFERENCES_INDEX,
  selectorIndexValue,
  selectorMatches,
  selectorReferencesOf,
} from './references.ts';

/**
 * The syncer's caches of its two clusters, and the look-ups its controllers and patches make in
 * them: the virtual object a host name stands for, the objects a selector reference picks.
 */

export const RESOURCES: Record<SyncedKind, ResourceRef> = {
  Service: { group: '', version: 'v1', plural: 'services', namespaced: true },
  Endpoints: { group: '', version: 'v1', plural: 'endpoints', namespaced: true },
  Secret: { group: '', version: 'v1', plural: 'secrets', namespaced: true },
  ConfigMap: { group: '', version: 'v1', plural: 'configmaps', namespaced: true },
};

export interface SyncerCaches {
  virtual: Map<SyncedKind, Informer>;
  host: Map<SyncedKind, Informer>;
  /** Each informer's side and resource (`virtual services`), for the status's `waitingFor`. */
  sides: Map<Informer, string>;
}

/** The host namespaces a syncer writes into; null when a mapping pattern leaves them open. */
export function hostNamespacesOf(ctx: SyncContext): string[] | null {
  const rules = namespaceRules(ctx);
  if (rules === null) return [ctx.hostNamespace];
  if (rules.some((rule) => rule.host.endsWith('*'))) return null;
  return [...new Set([ctx.hostNamespace, ...rules.map((rule) => rule.host)])];
}

/** The informers of the synced kinds on both clusters, with the indexes the syncer looks up. */
export function syncerCaches(
  clusters: { virtual: Cluster; host: Cluster },
  ctx: SyncContext,
  kinds: readonly SyncedKind[],
): SyncerCaches {
  const { config } = ctx;
  const sides = new Map<Informer, string>();
  const makeInformer = (
    side: keyof typeof clusters,
    kind: SyncedKind,
    selector: { namespace?: string; labelSelector?: string },
    indexers?: Record<string, IndexFunc>,
  ) => {
    const informer = clusters[side].informer(RESOURCES[kind], selector, indexers);
    sides.set(informer, `${side} ${RESOURCES[kind].plural}`);
    return informer;
  };

  // Virtual caches: the synced kinds, plus Services for the Endpoints syncer. Kinds whose
  // patches hold reference patches are indexed by the Secrets/ConfigMaps they name, and by the
  // kind and namespace their `reference.labels` selectors pick from.
  const referenceIndexers = (kind: SyncedKind): Record<string, IndexFunc> => ({
    [REFERENCES_INDEX]: (obj) =>
      referencesOf(kind, obj as unknown as KubeObject, ctx).map((r) =>
        referenceIndexValue(r.kind, r.namespace, r.name),
      ),
    [SELECTOR_REFERENCES_INDEX]: (obj) => [
      ...new Set(
        selectorReferencesOf(kind, obj as unknown as KubeObject, ctx).map((r) =>
          selectorIndexValue(r.kind, r.namespace),
        ),
      ),
    ],
  });
  const virtualKinds = new Set<SyncedKind>(kinds);
  if (kinds.includes('Endpoints')) virtualKinds.add('Service');
  const virtual = new Map<SyncedKind, Informer>();
  // Kinds a reference can name are also indexed by their host names, for the way back.
  const referenced = referencedKinds(config);
  for (const kind of virtualKinds) {
    const indexers: Record<string, IndexFunc> = hasReferencePatches(kind, config)
      ? referenceIndexers(kind)
      : {};
    if (referenced.has(kind)) {
      indexers[HOST_NAME_INDEX] = (obj) => hostNameIndexValues(kind, obj as unknown as KubeObject, ctx);
      // Selector references pick their candidates by namespace (selectedByLookup).
      indexers[NamespaceIndex] = commonIndexers[NamespaceIndex]!;
    }
    virtual.set(kind, makeInformer('virtual', kind, {}, indexers));
  }

  // Host caches: only our objects, in the namespace we write to. The syncer's identity may read
  // nothing else (a ServiceAccount bound in its namespaces only), so the caches are cluster-wide
  // only where namespace mappings name several namespaces or patterns.
  const hostNamespaces = hostNamespacesOf(ctx);
  const hostScope = {
    ...(hostNamespaces?.length === 1 ? { namespace: hostNamespaces[0] } : {}),
    labelSelector: `${LABEL_MANAGED_BY}=${ctx.vclusterName}`,
  };
  const host = new Map<SyncedKind, Informer>();
  for (const kind of kinds) host.set(kind, makeInformer('host', kind, hostScope));
  return { virtual, host, sides };
}

/**
 * A host name -> the virtual object it is the copy of, by the host-name index: only an object
 * that exists in the virtual cluster, and only when exactly one translates to that name.
 */
export function virtualObjectLookup(caches: SyncerCaches, ctx: SyncContext): HostToVirtualLookup {
  const referenced = referencedKinds(ctx.config);
  return (ref) => {
    if (!(referenced as Set<string>).has(ref.kind)) return null;
    const found = caches.virtual
      .get(ref.kind as SyncedKind)
      ?.store.byIndex(HOST_NAME_INDEX, hostNameIndexValue(ref.namespace, ref.name));
    if (found?.length !== 1) return null;
    const { name, namespace } = found[0]!.metadata ?? {};
    return name && namespace ? { name, namespace } : null;
  };
}

/** The objects of `kind` in a namespace that `referencing`'s selector references pick. */
export type SelectedBy = (
  from: SyncedKind,
  referencing: KubernetesObject,
  kind: SyncedKind,
) => KubernetesObject[];

/** {@link SelectedBy} over the virtual caches. */
export function selectedByLookup(caches: SyncerCaches, ctx: SyncContext): SelectedBy {
  return (from, referencing, kind) => {
    const candidates = caches.virtual.get(kind)?.store;
    if (!candidates) return [];
    return selectorReferencesOf(from, referencing as unknown as KubeObject, ctx)
      .filter((r) => r.kind === kind)
      .flatMap((r) =>
        candidates
          .byIndex(NamespaceIndex, r.namespace)
          .filter((obj) => selectorMatches(r.selector, obj.metadata?.labels ?? {})),
      );
  };
}

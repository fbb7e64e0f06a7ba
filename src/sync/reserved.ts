/**
 * What nothing from the virtual side may set on the host: reserved label and annotation keys,
 * and the fields a patch may never change. A tenant writes the virtual objects and the patches,
 * while the host objects are read by the platform's own controllers and by Kubernetes': a key or
 * field they act on would let the tenant steer them (the `management.platform/sharedsecret-*`
 * labels make the secret-sync controller copy a SharedSecret into a Secret; a Secret of type
 * `kubernetes.io/service-account-token` is filled with a token by kube-controller-manager).
 */

/**
 * Prefixes (the part of a key before `/`) whose keys are reserved; a subdomain of one is
 * reserved too (`x.vcluster.platform/...`). The platform's own prefixes, then Kubernetes
 * prefixes whose keys make a host component act on the object, or on others, as it would for
 * an object it owns.
 */
export const RESERVED_KEY_PREFIXES: readonly string[] = [
  // The platform: SharedSecret projection and secret sync, projects, the syncer's bookkeeping.
  'management.platform',
  'vcluster.platform',
  // Endpoints and EndpointSlice controllers: mirroring (skip-mirror), ownership (managed-by).
  'endpointslice.kubernetes.io',
  'endpoints.kubernetes.io',
  // RBAC: ClusterRole aggregation (aggregate-to-admin...), bootstrap policy reconciliation.
  'rbac.authorization.k8s.io',
  'rbac.authorization.kubernetes.io',
  // Namespace policy and placement: Pod Security levels, node selector and tolerations.
  'pod-security.kubernetes.io',
  'scheduler.alpha.kubernetes.io',
  // Nodes and their restriction (who may set what on a node).
  'node.kubernetes.io',
  'node-role.kubernetes.io',
  'node-restriction.kubernetes.io',
  // Volumes: binding and provisioning decide which claim owns a volume.
  'pv.kubernetes.io',
  'volume.kubernetes.io',
  'volume.beta.kubernetes.io',
  'storageclass.kubernetes.io',
  'ingressclass.kubernetes.io',
  // Controllers that adopt or delete objects by label (addon manager, jobs, API aggregation).
  'addonmanager.kubernetes.io',
  'batch.kubernetes.io',
  'controller.kubernetes.io',
  'kube-aggregator.kubernetes.io',
  'resource.kubernetes.io',
  'kubeadm.kubernetes.io',
];

/** Single reserved keys under prefixes that also hold keys meant for users. */
export const RESERVED_KEYS: readonly string[] = [
  // The token controller fills a Secret naming a ServiceAccount with that account's token.
  'kubernetes.io/service-account.name',
  'kubernetes.io/service-account.uid',
  // Legacy token tracking: the cleaner deletes tokens marked invalid.
  'kubernetes.io/legacy-token-last-used',
  'kubernetes.io/legacy-token-invalid-since',
  'kubernetes.io/enforce-mountable-secrets',
  'kubernetes.io/metadata.name',
  'kubernetes.io/bootstrapping',
  'kubernetes.io/cluster-service',
  // kube-proxy leaves a Service labelled for another proxy, and headless Endpoints, alone.
  'service.kubernetes.io/service-proxy-name',
  'service.kubernetes.io/headless',
  // Leader election records.
  'control-plane.alpha.kubernetes.io/leader',
];

/** Whether a label or annotation key is reserved (never copied from the virtual side to the host). */
export function isReservedKey(key: string): boolean {
  const slash = key.indexOf('/');
  if (slash < 0) return false;
  const prefix = key.slice(0, slash);
  let reservedPrefix = reservedPrefixes.get(prefix);
  if (reservedPrefix === undefined) {
    reservedPrefix = RESERVED_KEY_PREFIXES.some((r) => prefix === r || prefix.endsWith(`.${r}`));
    if (reservedPrefixes.size > 10_000) reservedPrefixes.clear();
    reservedPrefixes.set(prefix, reservedPrefix);
  }
  return reservedPrefix || RESERVED_KEY_SET.has(key);
}

const RESERVED_KEY_SET: ReadonlySet<string> = new Set(RESERVED_KEYS);
/** Whether a key prefix is reserved, decided once per prefix (keys repeat on every object). */
const reservedPrefixes = new Map<string, boolean>();

/**
 * Fields a patch may never change, in either direction: what the object is (`apiVersion`,
 * `kind`, a Secret's `type`), who owns it (`ownerReferences`, `finalizers`) and what the
 * apiserver owns. Configurations whose patches name one (or could reach one through `*`) are
 * refused; at sync time a patch that changes one anyway (a whole-object `''` patch) fails its
 * object, and nothing is written.
 */
export const RESTRICTED_FIELDS: readonly (readonly string[])[] = [
  ['apiVersion'],
  ['kind'],
  ['type'],
  ['metadata', 'ownerReferences'],
  ['metadata', 'finalizers'],
  ['metadata', 'generateName'],
  ['metadata', 'uid'],
  ['metadata', 'resourceVersion'],
  ['metadata', 'generation'],
  ['metadata', 'creationTimestamp'],
  ['metadata', 'deletionTimestamp'],
  ['metadata', 'deletionGracePeriodSeconds'],
  ['metadata', 'managedFields'],
  ['metadata', 'selfLink'],
];

/**
 * Where the object is: patches may not name these either, and whatever a patch does, the syncer
 * puts the object's own values back (with its bookkeeping labels and annotations).
 */
export const IDENTITY_FIELDS: readonly (readonly string[])[] = [
  ['metadata', 'name'],
  ['metadata', 'namespace'],
];

export function fieldName(field: readonly string[]): string {
  return field.join('.');
}

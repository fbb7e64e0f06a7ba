import { translateMetadataToHost, translateMetadataToVirtual } from './metadata.ts';
import { hostServiceSelector, virtualServiceSelector } from './names.ts';
import { hostObjectRef } from './object-refs.ts';
import { cloneJson, isJsonObject, type Json, type JsonObject, ownValue } from './patches/merge-patch.ts';
import { type KubeObject, metadataOf, type SyncContext, stringMapOf, stringOf } from './sync-context.ts';

/**
 * The synced kinds translated each way, pure: each kind's spec and data (Endpoints addresses,
 * Service selectors and allocated fields, Service status); metadata by metadata.ts.
 */

export type SyncedKind = 'Endpoints' | 'Service' | 'Secret' | 'ConfigMap';
export const SYNCED_KINDS: readonly SyncedKind[] = ['Endpoints', 'Service', 'Secret', 'ConfigMap'];

export class UnsupportedKind extends Error {
  override readonly name = 'UnsupportedKind';
  constructor(readonly kind: string) {
    super(`kind ${JSON.stringify(kind)} is not synced (supported: ${SYNCED_KINDS.join(', ')})`);
  }
}

export function assertSyncedKind(kind: string): asserts kind is SyncedKind {
  if (!(SYNCED_KINDS as readonly string[]).includes(kind)) throw new UnsupportedKind(kind);
}

function translateEndpointsSubsets(subsets: Json | undefined, ctx: SyncContext): Json | undefined {
  if (!Array.isArray(subsets)) return subsets;
  return subsets.map((subset) => {
    if (!isJsonObject(subset)) return subset;
    const out: JsonObject = { ...subset };
    for (const field of ['addresses', 'notReadyAddresses']) {
      const list = subset[field];
      if (!Array.isArray(list)) continue;
      out[field] = list.map((address) => {
        if (!isJsonObject(address) || !isJsonObject(address.targetRef)) return address;
        const targetRef = address.targetRef;
        if (targetRef.kind !== 'Pod') return address;
        const ref = hostObjectRef(ctx, 'Pod', stringOf(targetRef.name), stringOf(targetRef.namespace));
        const translated: JsonObject = { ...targetRef, name: ref.name, namespace: ref.namespace };
        delete translated.uid;
        delete translated.resourceVersion;
        return { ...address, targetRef: translated };
      });
    }
    return out;
  });
}

/**
 * Service spec fields that flow both ways, as the reference syncer copies them: whichever side
 * changed since the last sync wins, the virtual side when both did. Every other field of a
 * Service's spec is the virtual side's (the selector, the cluster IP, ...).
 */
export const SERVICE_BIDIRECTIONAL_FIELDS: readonly string[] = [
  'type',
  'ports',
  'externalIPs',
  'externalName',
  'loadBalancerIP',
  'publishNotReadyAddresses',
  'externalTrafficPolicy',
  'sessionAffinity',
  'sessionAffinityConfig',
  'loadBalancerSourceRanges',
];

/** Fields the host apiserver allocates; an existing host Service keeps them. */
const SERVICE_ALLOCATED = ['clusterIP', 'clusterIPs', 'ipFamilies', 'ipFamilyPolicy', 'healthCheckNodePort'];

function translateServiceSpec(
  spec: Json | undefined,
  existingSpec: JsonObject | null,
  vNamespace: string,
  ctx: SyncContext,
) {
  if (!isJsonObject(spec)) return spec;
  const out: JsonObject = cloneJson(spec);
  if (out.clusterIP !== 'None') {
    delete out.clusterIP;
    delete out.clusterIPs;
  }
  delete out.ipFamilies;
  delete out.ipFamilyPolicy;
  delete out.healthCheckNodePort;
  if (Array.isArray(out.ports)) {
    out.ports = out.ports.map((p) => {
      if (!isJsonObject(p)) return p;
      const { nodePort: _nodePort, ...rest } = p;
      return rest;
    });
  }
  const selector = stringMapOf(out.selector);
  if (selector && Object.keys(selector).length > 0) {
    out.selector = hostServiceSelector(selector, vNamespace, ctx.vclusterName);
  } else delete out.selector;
  if (existingSpec) {
    for (const f of SERVICE_ALLOCATED) {
      const allocated = ownValue(existingSpec, f);
      if (allocated !== undefined && ownValue(out, f) === undefined) out[f] = cloneJson(allocated);
    }
    if (Array.isArray(out.ports) && Array.isArray(existingSpec.ports)) {
      const existingPorts = existingSpec.ports.filter(isJsonObject);
      out.ports = out.ports.map((p) => {
        if (!isJsonObject(p)) return p;
        const same = existingPorts.find(
          (e) => e.port === p.port && (e.protocol ?? 'TCP') === (p.protocol ?? 'TCP'),
        );
        return same?.nodePort !== undefined ? { ...p, nodePort: same.nodePort } : p;
      });
    }
  }
  return out;
}

/**
 * The host object for a virtual object, before patches. `existingHost` supplies what the host
 * owns: allocated Service fields, host-only labels and annotations, `controlled-by`.
 */
export function translateToHost(
  kind: string,
  virtual: KubeObject,
  existingHost: KubeObject | null,
  ctx: SyncContext,
): KubeObject {
  assertSyncedKind(kind);
  const apiVersion = 'v1';
  const result: KubeObject = { ...cloneJson(virtual), apiVersion, kind };
  delete result.status;
  result.metadata = translateMetadataToHost(kind, apiVersion, virtual, existingHost, ctx);
  const vNamespace = stringOf(metadataOf(virtual).namespace);
  switch (kind) {
    case 'Endpoints': {
      const subsets = translateEndpointsSubsets(virtual.subsets, ctx);
      if (subsets !== undefined) result.subsets = subsets;
      break;
    }
    case 'Service': {
      const existingSpec = existingHost && isJsonObject(existingHost.spec) ? existingHost.spec : null;
      const spec = translateServiceSpec(virtual.spec, existingSpec, vNamespace, ctx);
      if (spec !== undefined) result.spec = spec;
      break;
    }
    case 'Secret':
    case 'ConfigMap':
      break;
  }
  return result;
}

/**
 * The virtual object for a host object, before reverse patches. With an existing virtual object
 * (the syncer's case) only what flows back changes: labels and annotations, a Service's status
 * and its bidirectional spec fields (`SERVICE_BIDIRECTIONAL_FIELDS`; node ports stay the virtual
 * side's); Endpoints subsets and Secret/ConfigMap contents stay the virtual side's. Without one
 * (an import, as `sync preview --to-virtual` shows it), everything is brought over.
 */
export function translateToVirtual(
  kind: string,
  host: KubeObject,
  existingVirtual: KubeObject | null,
  ctx: SyncContext,
): KubeObject {
  assertSyncedKind(kind);
  const base: KubeObject = existingVirtual ? cloneJson(existingVirtual) : { apiVersion: 'v1', kind };
  base.metadata = translateMetadataToVirtual(host, existingVirtual, ctx);
  switch (kind) {
    case 'Endpoints':
      if (!existingVirtual && host.subsets !== undefined) base.subsets = cloneJson(host.subsets);
      break;
    case 'Service': {
      if (isJsonObject(host.spec)) {
        if (!existingVirtual) {
          const spec = cloneJson(host.spec);
          const selector = stringMapOf(spec.selector);
          if (selector) spec.selector = virtualServiceSelector(selector, ctx.vclusterName);
          base.spec = spec;
        } else {
          base.spec = withBidirectionalServiceFields(base.spec, host.spec);
        }
      }
      return copyServiceStatusToVirtual(host, base);
    }
    case 'Secret':
    case 'ConfigMap':
      if (existingVirtual) break;
      for (const f of ['data', 'binaryData', 'stringData', 'type', 'immutable']) {
        const value = ownValue(host, f);
        if (value !== undefined) base[f] = cloneJson(value);
      }
      break;
  }
  return base;
}

/** A virtual Service spec with the bidirectional fields of a host spec (node ports excepted). */
function withBidirectionalServiceFields(virtualSpec: Json | undefined, hostSpec: JsonObject): JsonObject {
  const spec: JsonObject = isJsonObject(virtualSpec) ? virtualSpec : {};
  const virtualPorts = Array.isArray(spec.ports) ? spec.ports.filter(isJsonObject) : [];
  for (const field of SERVICE_BIDIRECTIONAL_FIELDS) {
    const value = hostSpec[field];
    if (value === undefined) {
      delete spec[field];
    } else if (field === 'ports' && Array.isArray(value)) {
      spec.ports = value.map((port) => {
        if (!isJsonObject(port)) return cloneJson(port);
        const { nodePort: _hostNodePort, ...rest } = cloneJson(port);
        const same = virtualPorts.find(
          (v) => v.port === port.port && (v.protocol ?? 'TCP') === (port.protocol ?? 'TCP'),
        );
        return same?.nodePort !== undefined ? { ...rest, nodePort: same.nodePort } : rest;
      });
    } else {
      spec[field] = cloneJson(value);
    }
  }
  return spec;
}

/** The virtual Service with the host Service's status (load balancer ingress, conditions). */
export function copyServiceStatusToVirtual(host: KubeObject, virtual: KubeObject): KubeObject {
  const result = cloneJson(virtual);
  if (host.status === undefined) delete result.status;
  else result.status = cloneJson(host.status);
  return result;
}

import { NAME_PLACEHOLDER } from './config.ts';
import { hostNameLong, hostNameShort } from './names.ts';
import type { ObjectRef, SyncContext } from './sync-context.ts';

/**
 * Where an object lives in the other cluster, pure: the namespace mapping rules of
 * `sync.toHost.namespaces`, the host name of a virtual object and back, and in-cluster DNS names.
 */

export class NamespaceNotMapped extends Error {
  override readonly name = 'NamespaceNotMapped';
  constructor(readonly namespace: string) {
    super(`virtual namespace ${JSON.stringify(namespace)} matches no sync.toHost.namespaces mapping`);
  }
}

export interface NamespaceRule {
  virtual: string;
  host: string;
}

/** Multi-namespace rules (exact rules first, `${name}` substituted), or null in single-namespace mode. */
export function namespaceRules(ctx: SyncContext): NamespaceRule[] | null {
  const namespaces = ctx.config.sync.toHost.namespaces;
  if (!namespaces.enabled) return null;
  const rules = Object.entries(namespaces.mappings.byName).map(([virtual, host]) => ({
    virtual: virtual.replaceAll(NAME_PLACEHOLDER, ctx.vclusterName),
    host: host.replaceAll(NAME_PLACEHOLDER, ctx.vclusterName),
  }));
  const isPattern = (r: NamespaceRule) => r.virtual.endsWith('*');
  return [...rules.filter((r) => !isPattern(r)), ...rules.filter(isPattern)];
}

/** Host namespace of a virtual namespace by the rules, or null when no rule matches. */
export function mapNamespaceToHost(rules: readonly NamespaceRule[], virtualNamespace: string): string | null {
  for (const rule of rules) {
    if (!rule.virtual.endsWith('*') && rule.virtual === virtualNamespace) return rule.host;
  }
  for (const rule of rules) {
    if (!rule.virtual.endsWith('*')) continue;
    const prefix = rule.virtual.slice(0, -1);
    if (virtualNamespace.startsWith(prefix) && virtualNamespace.length > prefix.length) {
      return rule.host.slice(0, -1) + virtualNamespace.slice(prefix.length);
    }
  }
  return null;
}

/** Virtual namespace of a host namespace by the rules, or null when no rule matches. */
export function mapNamespaceToVirtual(rules: readonly NamespaceRule[], hostNamespace: string): string | null {
  return mapNamespaceToHost(
    rules.map((r) => ({ virtual: r.host, host: r.virtual })),
    hostNamespace,
  );
}

/** Kinds whose host name is the readable `name-x-namespace-x-vcluster`; every other kind gets `v…`. */
export const LONG_NAME_KINDS: readonly string[] = ['Secret', 'ConfigMap', 'Service', 'Pod', 'Endpoints'];

/**
 * Where a namespaced virtual object lives on the host. Multi-namespace mode keeps the name and maps
 * the namespace; an unmapped namespace falls back to single-namespace naming unless `mappingsOnly`.
 */
export function hostObjectRef(ctx: SyncContext, kind: string, name: string, namespace: string): ObjectRef {
  const rules = namespaceRules(ctx);
  if (rules !== null) {
    const mapped = mapNamespaceToHost(rules, namespace);
    if (mapped !== null) return { name, namespace: mapped };
    if (ctx.config.sync.toHost.namespaces.mappingsOnly) throw new NamespaceNotMapped(namespace);
  }
  const translated = LONG_NAME_KINDS.includes(kind)
    ? hostNameLong(name, namespace, ctx.vclusterName)
    : hostNameShort(name, namespace, ctx.vclusterName);
  return { name: translated, namespace: ctx.hostNamespace };
}

/**
 * The virtual object a host name stands for, given the virtual namespace it would be in: the
 * inverse of {@link hostObjectRef}, checked by translating the candidate again (so a name that
 * translation cannot give, or that it gives only hashed, finds nothing). In multi-namespace mode
 * the host namespace maps back by the rules and the name is kept. Pure; null when none.
 */
export function virtualObjectRefOf(
  ctx: SyncContext,
  kind: string,
  host: ObjectRef,
  virtualNamespace: string,
): ObjectRef | null {
  const rules = namespaceRules(ctx);
  const mapped = rules === null ? null : mapNamespaceToVirtual(rules, host.namespace);
  const candidate: ObjectRef | null =
    mapped !== null
      ? { name: host.name, namespace: mapped }
      : host.name.endsWith(`-x-${virtualNamespace}-x-${ctx.vclusterName}`)
        ? {
            name: host.name.slice(0, -`-x-${virtualNamespace}-x-${ctx.vclusterName}`.length),
            namespace: virtualNamespace,
          }
        : null;
  if (candidate === null || candidate.name === '') return null;
  let again: ObjectRef;
  try {
    again = hostObjectRef(ctx, kind, candidate.name, candidate.namespace);
  } catch (err) {
    if (err instanceof NamespaceNotMapped) return null;
    throw err;
  }
  return again.name === host.name && again.namespace === host.namespace ? candidate : null;
}

/**
 * `<name>.<namespace>.svc[.<domain>]` -> `<host name>.<host namespace>.svc.<domain>`, the
 * virtual cluster's domain when none is given; any other input unchanged. The sandbox has its own
 * copy of this (it may hold no host function); tests keep them equal.
 */
export function virtualToHostDns(ctx: SyncContext, input: string): string {
  const parts = input.split('.');
  const [name, namespace, svc] = parts;
  if (parts.length < 3 || svc !== 'svc' || !name || !namespace) return input;
  let host: ObjectRef;
  try {
    host = hostObjectRef(ctx, 'Service', name, namespace);
  } catch (err) {
    if (err instanceof NamespaceNotMapped) return input;
    throw err;
  }
  const given = parts.slice(3).join('.');
  const domain = given === '' ? ctx.config.networking.advanced.clusterDomain : given;
  return `${host.name}.${host.namespace}.svc.${domain}`;
}

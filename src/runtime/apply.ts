import type { KubernetesObject } from '@kubernetes/client-node';
import { PatchStrategy } from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound, RuntimeError } from './errors.ts';
import { mergePatchDiff } from './json.ts';
import type { KubeApi } from './kube-api.ts';
import { collectionPath, objectPath, type ResourceRef } from './kube-client.ts';

/** Discovery of the group version lists no resource of that kind. */
export class UnknownKind extends RuntimeError {}

/**
 * Finds the resource (plural, scope) for an apiVersion and kind through discovery, cached per
 * client. Discovery of a group version is read once; a kind it did not list is looked up again
 * (a CRD may have been installed since).
 */
export class RestMapper {
  private readonly cache = new Map<string, Map<string, ResourceRef>>();

  constructor(private readonly api: KubeApi) {}

  async resourceFor(apiVersion: string, kind: string): Promise<ResourceRef> {
    const cached = this.cache.get(apiVersion)?.get(kind);
    if (cached) return cached;
    const slash = apiVersion.indexOf('/');
    const group = slash < 0 ? '' : apiVersion.slice(0, slash);
    const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
    const list = await this.api.request<{
      resources: Array<{ name: string; kind: string; namespaced: boolean }>;
    }>({
      method: 'GET',
      path: group === '' ? `/api/${version}` : `/apis/${group}/${version}`,
    });
    const byKind = new Map<string, ResourceRef>();
    for (const resource of list.resources) {
      if (resource.name.includes('/')) continue; // subresources
      byKind.set(resource.kind, { group, version, plural: resource.name, namespaced: resource.namespaced });
    }
    this.cache.set(apiVersion, byKind);
    const found = byKind.get(kind);
    if (!found) throw new UnknownKind(`the server has no resource for kind ${kind} in ${apiVersion}`);
    return found;
  }
}

export interface ApplyOptions {
  /** One field manager per component (e.g. `platform-cluster-controller`). */
  fieldManager: string;
  /** Take ownership of fields other managers own (controllers converging their children: true). */
  force?: boolean;
  /** The resource, if known; otherwise it is discovered from apiVersion/kind. */
  resource?: ResourceRef;
  mapper?: RestMapper;
}

/**
 * Server-side apply: PATCH with `application/apply-patch+yaml` (JSON is YAML) and `fieldManager`.
 * `obj` is the complete intent of this field manager: fields it owned before and omits now are
 * removed. It must carry apiVersion, kind, metadata.name (and namespace when namespaced).
 */
export async function applyObject<T extends KubernetesObject>(
  api: KubeApi,
  obj: T,
  options: ApplyOptions,
): Promise<T> {
  if (!obj.apiVersion || !obj.kind || !obj.metadata?.name) {
    throw new Error('applyObject needs apiVersion, kind and metadata.name');
  }
  const resource =
    options.resource ?? (await (options.mapper ?? new RestMapper(api)).resourceFor(obj.apiVersion, obj.kind));
  // managedFields and resourceVersion in an apply body would be interpreted as intent; drop them.
  const { managedFields: _managed, resourceVersion: _rv, ...metadata } = obj.metadata;
  return api.request<T>({
    method: 'PATCH',
    path: objectPath(resource, obj.metadata.namespace, obj.metadata.name),
    query: { fieldManager: options.fieldManager, force: options.force ? true : undefined },
    body: { ...obj, metadata },
    contentType: PatchStrategy.ServerSideApply,
  });
}

/**
 * Writes a controller's child: created with a plain POST when the cache does not have it (the
 * apiserver creates for a fraction of what a server-side apply of a new object costs), otherwise,
 * or when the POST finds the name taken (a cache behind), server-side applied with `force`.
 */
export async function createOrApply<T extends KubernetesObject>(
  api: KubeApi,
  obj: T,
  options: ApplyOptions & { resource: ResourceRef; cached: boolean },
): Promise<T> {
  if (!options.cached) {
    try {
      return await api.request<T>({
        method: 'POST',
        path: collectionPath(options.resource, obj.metadata?.namespace),
        query: { fieldManager: options.fieldManager },
        body: obj,
      });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  }
  return applyObject(api, obj, { ...options, force: true });
}

/**
 * Deletes the object as seen (`uid`, and `resourceVersion` too when `unchanged`), so a same-named
 * object that replaced it, or one that changed since, is never deleted by mistake (the apiserver
 * answers 409 instead). Already gone counts as done.
 */
export async function deleteObject(
  api: KubeApi,
  resource: ResourceRef,
  obj: KubernetesObject,
  options: { unchanged?: boolean } = {},
): Promise<void> {
  const { namespace, name, uid, resourceVersion } = obj.metadata ?? {};
  try {
    await api.request({
      method: 'DELETE',
      path: objectPath(resource, namespace, name ?? ''),
      body: {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        preconditions: { uid, ...(options.unchanged ? { resourceVersion } : {}) },
      },
    });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/**
 * Writes `status` through the status subresource with a merge patch computed against `current`
 * (the object as read, e.g. from the cache). Skipped, with no request, when nothing changed.
 * Returns the updated object, or undefined when skipped.
 *
 * With `unchanged`, the patch carries `current`'s resourceVersion, so the apiserver refuses it
 * (409) when the object changed since: a merge patch replaces lists whole, and `conditions`
 * written over a stale copy would drop a condition another writer set meanwhile.
 */
export async function patchStatus<T extends KubernetesObject & { status?: unknown }>(
  api: KubeApi,
  resource: ResourceRef,
  current: T,
  status: unknown,
  options: { unchanged?: boolean } = {},
): Promise<T | undefined> {
  const diff = mergePatchDiff(
    (current.status ?? {}) as Record<string, unknown>,
    (status ?? {}) as Record<string, unknown>,
  );
  if (Object.keys(diff).length === 0) return undefined;
  return api.request<T>({
    method: 'PATCH',
    path: `${objectPath(resource, current.metadata?.namespace, current.metadata?.name ?? '')}/status`,
    body: {
      ...(options.unchanged ? { metadata: { resourceVersion: current.metadata?.resourceVersion } } : {}),
      status: diff,
    },
    contentType: PatchStrategy.MergePatch,
  });
}

import type { KubernetesObject, V1Secret, V1StatefulSet } from '@kubernetes/client-node';
import { PatchStrategy } from '@kubernetes/client-node';
import type { VirtualClusterTemplateSpec } from '../api/virtualclustertemplate.ts';
import { applyObject, deleteObject } from '../runtime/apply.ts';
import { isNotFound, RuntimeError, TerminalError } from '../runtime/errors.ts';
import { fieldManagers } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { objectPath, type ResourceRef } from '../runtime/kube-client.ts';
import { ADMIN_KEYS, POD_PORTS, type SecretRole, secretNameOf } from './control-plane.ts';
import {
  dataClaimNameOf,
  endpointOf,
  IMMUTABLE_DIGEST_ANNOTATION,
  type InClusterRenderInput,
  renderInCluster,
  renderSecrets,
  selectorLabelsOf,
  serviceNameOf,
  statefulSetNameOf,
} from './in-cluster-render.ts';
import { ensureInstancePki, type SecretText } from './pki.ts';
import type { ProvisionedInstance, Provisioner, ProvisionOptions, ProvisionStatus } from './provisioner.ts';

/**
 * The in-cluster provisioner (what the chart runs): the objects in-cluster-render.ts describes,
 * written by server-side apply into the instance's namespace of the host cluster, as the
 * VirtualClusterInstance controller's field manager. Its state is the host's objects only.
 */

export const RESOURCES = {
  statefulSets: { group: 'apps', version: 'v1', plural: 'statefulsets', namespaced: true },
  services: { group: '', version: 'v1', plural: 'services', namespaced: true },
  secrets: { group: '', version: 'v1', plural: 'secrets', namespaced: true },
  claims: { group: '', version: 'v1', plural: 'persistentvolumeclaims', namespaced: true },
} as const satisfies Record<string, ResourceRef>;

/**
 * The StatefulSet's selector, serviceName or claim template changed (the template's storage):
 * fields the apiserver refuses to update. The old StatefulSet was deleted leaving its pod and
 * claim (orphaned: the claim keeps the data) and is not gone yet; the next attempt makes the new
 * one, which adopts them. Retry.
 */
export class ControlPlaneBeingReplaced extends RuntimeError {}

/**
 * An object the instance would be made of exists and is not the instance's (a tenant's Service
 * or Secret of that name in the namespace): it is left as it is and nothing is written over it.
 */
export class NameTakenInNamespace extends TerminalError {}

/** `ensure` was handed an instance without a uid: its objects could not be owned by it. */
export class InstanceWithoutUid extends RuntimeError {}

export interface InClusterProvisionerOptions {
  /** The host cluster (the instance's namespace is written). */
  readonly api: KubeApi;
  /** The platform's image and how to pull it (the chart's `image` values). */
  readonly image: string;
  readonly imagePullPolicy?: InClusterRenderInput['imagePullPolicy'];
  readonly imagePullSecrets?: readonly string[];
  /**
   * The instance's template spec (`spec.templateRef`), read by the caller from its caches;
   * undefined when it names none. Read on every `ensure`, so a changed template is applied.
   */
  readonly templateOf: (
    instance: ProvisionedInstance,
  ) => Promise<Pick<VirtualClusterTemplateSpec, 'resources' | 'storage'> | undefined>;
  readonly now?: () => Date;
}

const fieldManager = fieldManagers.virtualCluster;

export class InClusterProvisioner implements Provisioner {
  constructor(private readonly options: InClusterProvisionerOptions) {}

  async ensure(instance: ProvisionedInstance, options: ProvisionOptions): Promise<ProvisionStatus> {
    const owner = ownerOf(instance);
    const { statefulSet, service } = renderInCluster({
      instance: owner,
      template: await this.options.templateOf(instance),
      controllerManager: options.controllerManager,
      sleeping: false,
      image: this.options.image,
      imagePullPolicy: this.options.imagePullPolicy,
      imagePullSecrets: this.options.imagePullSecrets,
    });
    // Everything of the instance's name is read, and refused when it is another's, before
    // anything is written.
    const [pki, admin, currentService, current] = await Promise.all([
      this.read<V1Secret>(RESOURCES.secrets, instance.namespace, secretNameOf(instance.name, 'pki')),
      this.read<V1Secret>(RESOURCES.secrets, instance.namespace, secretNameOf(instance.name, 'admin')),
      this.read(RESOURCES.services, instance.namespace, service.metadata!.name!),
      this.read<V1StatefulSet>(RESOURCES.statefulSets, instance.namespace, statefulSet.metadata!.name!),
    ]);
    for (const [resource, object] of [
      [RESOURCES.secrets, pki],
      [RESOURCES.secrets, admin],
      [RESOURCES.services, currentService],
      [RESOURCES.statefulSets, current],
    ] as const)
      if (object) refuseIfNotOwned(resource, object, instance);

    const material = await ensureInstancePki(
      { pki: secretText(pki), admin: secretText(admin) },
      {
        namespace: instance.namespace,
        name: instance.name,
        endpoint: endpointOf(instance),
        apiServerPort: POD_PORTS.apiServer,
      },
      this.options.now?.() ?? new Date(),
    );
    const secrets = renderSecrets(owner, { pki: material.pki, admin: material.admin });
    await this.write(RESOURCES.secrets, secrets.pki, pki);
    await this.write(RESOURCES.secrets, secrets.admin, admin);
    await this.write(RESOURCES.services, service, currentService);

    if (current && needsReplacement(current, statefulSet)) {
      // Orphan: the pod and the claim stay (the data with them) for the new StatefulSet to adopt.
      await this.options.api
        .request({
          method: 'DELETE',
          path: objectPath(RESOURCES.statefulSets, instance.namespace, current.metadata!.name!),
          body: {
            apiVersion: 'v1',
            kind: 'DeleteOptions',
            propagationPolicy: 'Orphan',
            preconditions: { uid: current.metadata?.uid },
          },
        })
        .catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
      if (await this.read(RESOURCES.statefulSets, instance.namespace, current.metadata!.name!))
        throw new ControlPlaneBeingReplaced(
          `the control plane's StatefulSet ${instance.namespace}/${current.metadata!.name} is being replaced (its storage changed)`,
        );
      const applied = await this.write(RESOURCES.statefulSets, statefulSet, undefined);
      return statusOf(instance, applied, material.admin[ADMIN_KEYS.caCert]);
    }
    const applied = await this.write(RESOURCES.statefulSets, statefulSet, current);
    return statusOf(instance, applied, material.admin[ADMIN_KEYS.caCert]);
  }

  async stop(instance: ProvisionedInstance): Promise<void> {
    const name = statefulSetNameOf(instance.name);
    const current = await this.read(RESOURCES.statefulSets, instance.namespace, name);
    if (!current) return;
    refuseIfNotOwned(RESOURCES.statefulSets, current, instance);
    try {
      await this.options.api.request({
        method: 'PATCH',
        path: `${objectPath(RESOURCES.statefulSets, instance.namespace, name)}/scale`,
        query: { fieldManager },
        // The scale of the StatefulSet read, not of a same-named newcomer.
        body: { metadata: { uid: current.metadata?.uid }, spec: { replicas: 0 } },
        contentType: PatchStrategy.MergePatch,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  async remove(instance: ProvisionedInstance): Promise<void> {
    const { namespace, name } = instance;
    const targets: Array<[ResourceRef, string]> = [
      // Its pod goes with it (the garbage collector), then the claim is free to go.
      [RESOURCES.statefulSets, statefulSetNameOf(name)],
      [RESOURCES.claims, dataClaimNameOf(name)],
      [RESOURCES.services, serviceNameOf(name)],
      ...(['pki', 'admin'] as SecretRole[]).map((role): [ResourceRef, string] => [
        RESOURCES.secrets,
        secretNameOf(name, role),
      ]),
    ];
    for (const [resource, objectName] of targets) {
      const found = await this.read(resource, namespace, objectName);
      // Only what is the instance's: a same-named object of someone else is left alone.
      if (found && isOwnedBy(found, instance, resource))
        await deleteObject(this.options.api, resource, found, {});
    }
  }

  async status(instance: ProvisionedInstance): Promise<ProvisionStatus> {
    const statefulSet = await this.read<V1StatefulSet>(
      RESOURCES.statefulSets,
      instance.namespace,
      statefulSetNameOf(instance.name),
    );
    if (!statefulSet) return { phase: 'Absent' };
    if (!isOwnedBy(statefulSet, instance, RESOURCES.statefulSets))
      return {
        phase: 'Absent',
        message: `the StatefulSet ${statefulSet.metadata?.name} is not this virtual cluster's`,
      };
    const admin = await this.read<V1Secret>(
      RESOURCES.secrets,
      instance.namespace,
      secretNameOf(instance.name, 'admin'),
    );
    const ca = admin?.data?.[ADMIN_KEYS.caCert];
    return statusOf(
      instance,
      statefulSet,
      ca === undefined ? undefined : Buffer.from(ca, 'base64').toString(),
    );
  }

  /**
   * Server-side apply of `desired` over `current` (the instance's object of that name as read,
   * or undefined). Over an existing object the apply carries its uid: should it have been
   * replaced by another of the same name since it was read, the apiserver refuses the apply (a
   * uid cannot change) instead of writing over the newcomer.
   */
  private write<T extends KubernetesObject>(
    resource: ResourceRef,
    desired: T,
    current: KubernetesObject | undefined,
  ): Promise<T> {
    const uid = current?.metadata?.uid;
    return applyObject(
      this.options.api,
      uid ? { ...desired, metadata: { ...desired.metadata, uid } } : desired,
      {
        fieldManager,
        force: true,
        resource,
      },
    );
  }

  private async read<T extends KubernetesObject>(
    resource: ResourceRef,
    namespace: string,
    name: string,
  ): Promise<T | undefined> {
    try {
      return await this.options.api.request<T>({
        method: 'GET',
        path: objectPath(resource, namespace, name),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}

function ownerOf(instance: ProvisionedInstance): InClusterRenderInput['instance'] {
  if (!instance.uid)
    throw new InstanceWithoutUid(
      `virtual cluster ${instance.namespace}/${instance.name} has no uid to own its control plane`,
    );
  return { namespace: instance.namespace, name: instance.name, uid: instance.uid };
}

function secretText(secret: V1Secret | undefined): SecretText | undefined {
  if (!secret?.data) return undefined;
  return Object.fromEntries(
    Object.entries(secret.data).map(([key, value]) => [key, Buffer.from(value, 'base64').toString()]),
  );
}

function refuseIfNotOwned(
  resource: ResourceRef,
  object: KubernetesObject,
  instance: ProvisionedInstance,
): void {
  if (isOwnedBy(object, instance, resource)) return;
  throw new NameTakenInNamespace(
    `${resource.plural} ${instance.namespace}/${object.metadata?.name} exists and is not virtual cluster ${instance.name}'s: it is left as it is; delete it or give the virtual cluster another name`,
  );
}

/** Whether the fields the apiserver refuses to update differ between `current` and `desired`. */
export function needsReplacement(current: V1StatefulSet, desired: V1StatefulSet): boolean {
  return (
    current.metadata?.annotations?.[IMMUTABLE_DIGEST_ANNOTATION] !==
    desired.metadata?.annotations?.[IMMUTABLE_DIGEST_ANNOTATION]
  );
}

/**
 * Whether `object` is the instance's: owned by it (its uid when known), or the claim of its
 * StatefulSet (made by the StatefulSet controller from the claim template, so with its labels;
 * owned by the StatefulSet, or by nothing once orphaned).
 */
function isOwnedBy(object: KubernetesObject, instance: ProvisionedInstance, resource: ResourceRef): boolean {
  const references = object.metadata?.ownerReferences ?? [];
  const byInstance = references.some(
    (ref) =>
      ref.kind === 'VirtualClusterInstance' &&
      ref.name === instance.name &&
      (instance.uid === undefined || ref.uid === instance.uid),
  );
  if (byInstance) return true;
  if (resource !== RESOURCES.claims) return false;
  const labels = object.metadata?.labels ?? {};
  const claimOfOurs = Object.entries(selectorLabelsOf(instance.name)).every(
    ([key, value]) => labels[key] === value,
  );
  return (
    claimOfOurs &&
    (references.length === 0 ||
      references.some((ref) => ref.kind === 'StatefulSet' && ref.name === statefulSetNameOf(instance.name)))
  );
}

/**
 * What the StatefulSet says: stopped at zero replicas, ready with a ready replica, counted by
 * the StatefulSet controller after it saw the current spec (a count from before a stop and a
 * wake is not the woken pod's).
 */
export function statusOf(
  instance: ProvisionedInstance,
  statefulSet: V1StatefulSet,
  caPem: string | undefined,
): ProvisionStatus {
  const where = {
    endpoint: endpointOf(instance),
    adminSecretName: secretNameOf(instance.name, 'admin'),
    ...(caPem !== undefined ? { caData: Buffer.from(caPem).toString('base64') } : {}),
  };
  if ((statefulSet.spec?.replicas ?? 1) === 0) return { phase: 'Stopped', ...where };
  const observed = (statefulSet.status?.observedGeneration ?? 0) >= (statefulSet.metadata?.generation ?? 1);
  if (observed && (statefulSet.status?.readyReplicas ?? 0) >= 1) return { phase: 'Ready', ...where };
  return {
    phase: 'Starting',
    ...where,
    message: observed
      ? `the control plane's pod is not ready (${statefulSet.status?.readyReplicas ?? 0}/1 ready)`
      : 'the StatefulSet controller has not seen the latest spec yet',
  };
}

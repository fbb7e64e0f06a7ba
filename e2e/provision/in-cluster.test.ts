import type {
  KubernetesObject,
  V1PersistentVolumeClaim,
  V1Pod,
  V1Secret,
  V1Service,
  V1StatefulSet,
} from '@kubernetes/client-node';
import { PatchStrategy } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { VirtualClusterTemplateSpec } from '../../src/api/virtualclustertemplate.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { secretNameOf } from '../../src/provision/control-plane.ts';
import {
  ControlPlaneBeingReplaced,
  InClusterProvisioner,
  NameTakenInNamespace,
  RESOURCES,
} from '../../src/provision/in-cluster.ts';
import {
  dataClaimNameOf,
  podControlPlane,
  SERVICE_PORT,
  selectorLabelsOf,
  serviceNameOf,
  statefulSetNameOf,
} from '../../src/provision/in-cluster-render.ts';
import { applyObject } from '../../src/runtime/apply.ts';
import { isApiError } from '../../src/runtime/errors.ts';
import { fieldManagers } from '../../src/runtime/field-managers.ts';
import { collectionPath, KubeClient, objectPath, type ResourceRef } from '../../src/runtime/kube-client.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually, waitForValue } from '../support/wait.ts';

const GROUP_VERSION = 'management.platform/v1';
const INSTANCES: ResourceRef = {
  group: 'management.platform',
  version: 'v1',
  plural: 'virtualclusterinstances',
  namespaced: true,
};
const TEMPLATES: ResourceRef = {
  group: 'management.platform',
  version: 'v1',
  plural: 'virtualclustertemplates',
  namespaced: false,
};
const PODS: ResourceRef = { group: '', version: 'v1', plural: 'pods', namespaced: true };

/**
 * The in-cluster provisioner against a real apiserver with a controller manager (its garbage
 * collector: owner references and orphaning are real). No kubelet and no StatefulSet controller
 * run here, so no pod starts: what the rendered objects are is proven at the API level (created
 * server-side, admission and schema validation passing, Pod Security "restricted" enforced on
 * a pod made from the template). Where the StatefulSet controller would act (the claim of pod 0,
 * readyReplicas), the test writes what it would and says so.
 */
describe('in-cluster provisioner', () => {
  const startCluster = useExtraClusters();
  let cluster: Cluster;
  let api: KubeClient;
  const namespace = uniqueName('vc-incluster');
  const templateName = uniqueName('tpl');
  const image = 'ghcr.io/cluster-platform/platform:0.1.0';

  const get = <T extends KubernetesObject>(
    resource: ResourceRef,
    name: string,
    ns: string | undefined = namespace,
  ) =>
    api.request<T>({ method: 'GET', path: objectPath(resource, ns, name) }).catch((err: unknown) => {
      if (isApiError(err, 404)) return undefined;
      throw err;
    });
  const list = async <T extends KubernetesObject>(resource: ResourceRef) =>
    (await api.request<{ items: T[] }>({ method: 'GET', path: collectionPath(resource, namespace) })).items;
  const mergePatch = (resource: ResourceRef, name: string, body: unknown, subresource = '') =>
    api.request({
      method: 'PATCH',
      path: `${objectPath(resource, resource.namespaced ? namespace : undefined, name)}${subresource}`,
      body,
      contentType: PatchStrategy.MergePatch,
    });
  const createInstance = async (name: string) =>
    api.request<KubernetesObject>({
      method: 'POST',
      path: collectionPath(INSTANCES, namespace),
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'VirtualClusterInstance',
        metadata: { name },
        spec: { displayName: 'in-cluster e2e', templateRef: { name: templateName } },
      },
    });
  const provisioner = () =>
    new InClusterProvisioner({
      api,
      image,
      templateOf: async () =>
        (
          await get<KubernetesObject & { spec: VirtualClusterTemplateSpec }>(
            TEMPLATES,
            templateName,
            undefined,
          )
        )?.spec,
    });
  /** `ensure` as the controller calls it: again after a retryable replacement. */
  const ensureConverged = async (
    p: InClusterProvisioner,
    instance: { namespace: string; name: string; uid: string },
  ) => {
    let replaced = 0;
    await eventually(
      async () => {
        try {
          await p.ensure(instance, { controllerManager: true });
          return true;
        } catch (err) {
          if (!(err instanceof ControlPlaneBeingReplaced)) throw err;
          replaced += 1;
          return false;
        }
      },
      30_000,
      'the StatefulSet replaced',
    );
    return replaced;
  };

  beforeAll(async () => {
    cluster = await startCluster({ name: uniqueName('incluster'), controllerManager: true });
    const kc = kubeConfigFor(cluster);
    await installCrds(kc);
    api = new KubeClient(kc);
    await api.request({
      method: 'POST',
      path: '/api/v1/namespaces',
      body: {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name: namespace,
          labels: {
            'pod-security.kubernetes.io/enforce': 'restricted',
            'pod-security.kubernetes.io/enforce-version': 'latest',
          },
        },
      },
    });
    await api.request({
      method: 'POST',
      path: collectionPath(TEMPLATES),
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'VirtualClusterTemplate',
        metadata: { name: templateName },
        spec: {
          resources: { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '1Gi' } },
          storage: { size: '1Gi', storageClassName: 'standard' },
        },
      },
    });
  });
  afterAll(() => {
    api?.close();
  });

  describe('one instance, through its life', () => {
    let instance: { namespace: string; name: string; uid: string };
    let firstStatefulSetUid: string;
    beforeAll(async () => {
      const created = await createInstance(uniqueName('vc'));
      instance = { namespace, name: created.metadata!.name!, uid: created.metadata!.uid! };
    });

    test('ensure creates the Secrets, the Service and the StatefulSet server-side, each owned by the instance and written as the controller', async () => {
      const status = await provisioner().ensure(instance, { controllerManager: true });
      // No StatefulSet controller here: the pod never becomes ready.
      expect(status.phase).toBe('Starting');
      expect(status.endpoint).toBe(`https://${instance.name}.${namespace}.svc`);
      expect(status.adminSecretName).toBe(secretNameOf(instance.name, 'admin'));

      const statefulSet = (await get<V1StatefulSet>(
        RESOURCES.statefulSets,
        statefulSetNameOf(instance.name),
      ))!;
      const service = (await get<V1Service>(RESOURCES.services, serviceNameOf(instance.name)))!;
      const pki = (await get<V1Secret>(RESOURCES.secrets, secretNameOf(instance.name, 'pki')))!;
      const admin = (await get<V1Secret>(RESOURCES.secrets, secretNameOf(instance.name, 'admin')))!;
      for (const object of [statefulSet, service, pki, admin]) {
        expect(object.metadata?.ownerReferences).toEqual([
          {
            apiVersion: GROUP_VERSION,
            kind: 'VirtualClusterInstance',
            name: instance.name,
            uid: instance.uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ]);
        expect(object.metadata?.managedFields?.map((f) => [f.manager, f.operation])).toEqual([
          [fieldManagers.virtualCluster, 'Apply'],
        ]);
      }
      firstStatefulSetUid = statefulSet.metadata!.uid!;
      expect(status.caData).toBe(admin.data!['ca.crt']);

      // What the apiserver stored is the description's command lines and its files' keys.
      const description = podControlPlane({ instance, controllerManager: true });
      const pod = statefulSet.spec!.template.spec!;
      expect(pod.containers.map((c) => c.args)).toEqual(description.components.map((c) => c.argv));
      for (const file of description.components.flatMap((c) => c.files))
        expect(Object.keys(pki.data!)).toContain(file.key);
      // Pod-level resources are kept (a cluster without the feature would drop them silently).
      expect(pod.resources).toEqual({
        requests: { cpu: '250m', memory: '512Mi' },
        limits: { memory: '1Gi' },
      });
      expect(
        statefulSet.spec!.volumeClaimTemplates!.map((c) => c.spec?.resources?.requests?.storage),
      ).toEqual(['1Gi']);
      expect(statefulSet.spec!.replicas).toBe(1);
      expect(service.spec!.ports!.map((p) => [p.port, p.targetPort])).toEqual([[SERVICE_PORT, 'https']]);
      expect(service.spec!.selector).toEqual(selectorLabelsOf(instance.name));
    });

    test('a second ensure changes nothing (the PKI is kept byte for byte, no object is written again)', async () => {
      const versions = async () =>
        Promise.all([
          get(RESOURCES.statefulSets, statefulSetNameOf(instance.name)),
          get(RESOURCES.services, serviceNameOf(instance.name)),
          get(RESOURCES.secrets, secretNameOf(instance.name, 'pki')),
          get(RESOURCES.secrets, secretNameOf(instance.name, 'admin')),
        ]).then((objects) => objects.map((o) => o?.metadata?.resourceVersion));
      const before = await versions();
      await provisioner().ensure(instance, { controllerManager: true });
      expect(await versions()).toEqual(before);
    });

    test('the pod of the StatefulSet passes Pod Security "restricted" in its namespace, and a weakened one does not', async () => {
      const statefulSet = (await get<V1StatefulSet>(
        RESOURCES.statefulSets,
        statefulSetNameOf(instance.name),
      ))!;
      // The pod as the StatefulSet controller makes it: the template, and a volume per claim template.
      const podOf = (spec: NonNullable<V1Pod['spec']>): V1Pod => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: `${statefulSet.metadata!.name}-0`,
          namespace,
          labels: statefulSet.spec!.template.metadata?.labels,
        },
        spec: {
          ...spec,
          volumes: [
            ...(spec.volumes ?? []),
            ...statefulSet.spec!.volumeClaimTemplates!.map((claim) => ({
              name: claim.metadata!.name!,
              persistentVolumeClaim: { claimName: `${claim.metadata!.name}-${statefulSet.metadata!.name}-0` },
            })),
          ],
        },
      });
      const dryRunCreate = (pod: V1Pod) =>
        api.request<V1Pod>({
          method: 'POST',
          path: collectionPath(PODS, namespace),
          query: { dryRun: 'All' },
          body: pod,
        });
      const template = statefulSet.spec!.template.spec!;
      const accepted = await dryRunCreate(podOf(template));
      expect(accepted.spec?.containers.map((c) => c.name)).toEqual(template.containers.map((c) => c.name));

      // The same pod with one container allowed to escalate is refused: the namespace enforces.
      const weakened = structuredClone(template);
      weakened.containers[0]!.securityContext = {
        ...weakened.containers[0]!.securityContext,
        allowPrivilegeEscalation: true,
      };
      const refused = await dryRunCreate(podOf(weakened)).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(isApiError(refused, 403)).toBe(true);
      expect(JSON.stringify((refused as { body?: unknown }).body)).toContain('restricted');
    });

    test('a changed template is applied: resources update the StatefulSet in place, storage replaces it and keeps the claim', async () => {
      await mergePatch(TEMPLATES, templateName, {
        spec: { resources: { limits: { cpu: '2', memory: '2Gi' } } },
      });
      await provisioner().ensure(instance, { controllerManager: true });
      const updated = (await get<V1StatefulSet>(RESOURCES.statefulSets, statefulSetNameOf(instance.name)))!;
      expect(updated.metadata!.uid).toBe(firstStatefulSetUid);
      expect(updated.spec!.template.spec!.resources).toEqual({
        requests: { cpu: '250m', memory: '512Mi' },
        limits: { cpu: '2', memory: '2Gi' },
      });

      // The claim of pod 0, as the StatefulSet controller makes it (none runs here): its claim
      // template's labels, owned by the StatefulSet (persistentVolumeClaimRetentionPolicy).
      const claimTemplate = updated.spec!.volumeClaimTemplates![0]!;
      await api.request({
        method: 'POST',
        path: collectionPath(RESOURCES.claims, namespace),
        body: {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: {
            name: dataClaimNameOf(instance.name),
            labels: claimTemplate.metadata?.labels,
            ownerReferences: [
              {
                apiVersion: 'apps/v1',
                kind: 'StatefulSet',
                name: updated.metadata!.name!,
                uid: updated.metadata!.uid!,
              },
            ],
          },
          spec: claimTemplate.spec,
        },
      });

      await mergePatch(TEMPLATES, templateName, { spec: { storage: { size: '2Gi' } } });
      await ensureConverged(provisioner(), instance);
      const renewed = (await get<V1StatefulSet>(RESOURCES.statefulSets, statefulSetNameOf(instance.name)))!;
      expect(renewed.metadata!.uid).not.toBe(firstStatefulSetUid);
      const claimSpec = renewed.spec!.volumeClaimTemplates![0]!.spec!;
      expect(claimSpec.resources?.requests?.storage).toBe('2Gi');
      expect(claimSpec.storageClassName).toBe('standard');
      // The data stays: the old claim was orphaned, not deleted, for the new StatefulSet to adopt.
      const claim = await waitForValue(
        'the claim orphaned',
        () => get<V1PersistentVolumeClaim>(RESOURCES.claims, dataClaimNameOf(instance.name)),
        (c) => c !== undefined && (c.metadata?.ownerReferences ?? []).length === 0,
      );
      expect(claim?.metadata?.deletionTimestamp).toBeUndefined();
    });

    test('stop scales to zero and keeps the storage and Secrets; ensure wakes it; status follows readyReplicas', async () => {
      const p = provisioner();
      await p.stop(instance);
      const asleep = (await get<V1StatefulSet>(RESOURCES.statefulSets, statefulSetNameOf(instance.name)))!;
      expect(asleep.spec!.replicas).toBe(0);
      expect((await p.status(instance)).phase).toBe('Stopped');
      expect(await get(RESOURCES.claims, dataClaimNameOf(instance.name))).toBeDefined();
      expect(await get(RESOURCES.secrets, secretNameOf(instance.name, 'pki'))).toBeDefined();
      await p.stop(instance); // idempotent

      expect((await p.ensure(instance, { controllerManager: true })).phase).toBe('Starting');
      expect(
        (await get<V1StatefulSet>(RESOURCES.statefulSets, statefulSetNameOf(instance.name)))!.spec!.replicas,
      ).toBe(1);
      // The StatefulSet controller's report of a ready pod (none runs here to write it): first
      // a count from before the wake (an older generation), which does not count; then its own.
      const woken = (await get<V1StatefulSet>(RESOURCES.statefulSets, statefulSetNameOf(instance.name)))!;
      const reportReady = (observedGeneration: number) =>
        mergePatch(
          RESOURCES.statefulSets,
          statefulSetNameOf(instance.name),
          { status: { observedGeneration, replicas: 1, readyReplicas: 1, availableReplicas: 1 } },
          '/status',
        );
      await reportReady(woken.metadata!.generation! - 1);
      expect((await p.status(instance)).phase).toBe('Starting');
      await reportReady(woken.metadata!.generation!);
      const ready = await p.status(instance);
      expect(ready.phase).toBe('Ready');
      expect(ready.caData).toBeDefined();
    });

    test('remove deletes the StatefulSet, its claim, the Service and the Secrets: listing finds nothing of the instance', async () => {
      const p = provisioner();
      await p.remove(instance);
      await p.remove(instance); // idempotent
      expect((await p.status(instance)).phase).toBe('Absent');
      const ours = (o: KubernetesObject) =>
        o.metadata?.labels?.['app.kubernetes.io/instance'] === instance.name ||
        (o.metadata?.ownerReferences ?? []).some((r) => r.uid === instance.uid);
      expect((await list(RESOURCES.statefulSets)).filter(ours)).toEqual([]);
      expect((await list(RESOURCES.services)).filter(ours)).toEqual([]);
      expect((await list(RESOURCES.secrets)).filter(ours)).toEqual([]);
      // The claim waits for the pvc-protection controller (not run here) to drop its finalizer,
      // which it does once no pod uses the claim; the deletion itself was asked for.
      const claims = (await list<V1PersistentVolumeClaim>(RESOURCES.claims)).filter(ours);
      for (const claim of claims) {
        expect(claim.metadata?.deletionTimestamp).toBeDefined();
        expect(claim.metadata?.finalizers).toEqual(['kubernetes.io/pvc-protection']);
        await api.request({
          method: 'PATCH',
          path: objectPath(RESOURCES.claims, namespace, claim.metadata!.name!),
          body: [{ op: 'remove', path: '/metadata/finalizers' }],
          contentType: PatchStrategy.JsonPatch,
        });
      }
      await eventually(
        async () => (await list(RESOURCES.claims)).filter(ours).length === 0,
        30_000,
        'the claim gone',
      );
    });
  });

  test("deleting the instance removes its control plane's objects (garbage collection of what it owns)", async () => {
    const created = await createInstance(uniqueName('vc'));
    const instance = { namespace, name: created.metadata!.name!, uid: created.metadata!.uid! };
    await provisioner().ensure(instance, { controllerManager: false });
    expect(await get(RESOURCES.statefulSets, statefulSetNameOf(instance.name))).toBeDefined();
    await api.request({
      method: 'DELETE',
      path: objectPath(INSTANCES, namespace, instance.name),
      body: { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' },
    });
    const owned = async () =>
      [
        ...(await list(RESOURCES.statefulSets)),
        ...(await list(RESOURCES.services)),
        ...(await list(RESOURCES.secrets)),
      ].filter((o) => (o.metadata?.ownerReferences ?? []).some((r) => r.uid === instance.uid));
    await waitForValue(
      'the objects of the deleted instance gone',
      owned,
      (objects) => objects.length === 0,
      60_000,
    );
  });

  test("objects of the instance's names that are another's are left as they are, and nothing is written", async () => {
    const created = await createInstance(uniqueName('vc'));
    const instance = { namespace, name: created.metadata!.name!, uid: created.metadata!.uid! };
    // A tenant's own Service, named as the instance's would be.
    const theirs = await api.request<V1Service>({
      method: 'POST',
      path: collectionPath(RESOURCES.services, namespace),
      body: {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: serviceNameOf(instance.name) },
        spec: { selector: { app: 'theirs' }, ports: [{ port: 80 }] },
      },
    });
    await expect(provisioner().ensure(instance, { controllerManager: true })).rejects.toThrow(
      NameTakenInNamespace,
    );
    const after = (await get<V1Service>(RESOURCES.services, serviceNameOf(instance.name)))!;
    expect(after.metadata!.resourceVersion).toBe(theirs.metadata!.resourceVersion);
    for (const [resource, name] of [
      [RESOURCES.secrets, secretNameOf(instance.name, 'pki')],
      [RESOURCES.secrets, secretNameOf(instance.name, 'admin')],
      [RESOURCES.statefulSets, statefulSetNameOf(instance.name)],
    ] as const)
      expect(await get(resource, name), name).toBeUndefined();

    // What write() relies on: an apply carrying another object's uid is refused, not applied.
    const refused = await applyObject(
      api,
      {
        ...after,
        metadata: { name: after.metadata!.name, namespace, uid: instance.uid },
        spec: { ports: [{ port: 81 }] },
      },
      { fieldManager: fieldManagers.virtualCluster, force: true, resource: RESOURCES.services },
    ).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isApiError(refused)).toBe(true);
    expect(
      (await get<V1Service>(RESOURCES.services, serviceNameOf(instance.name)))!.metadata!.resourceVersion,
    ).toBe(theirs.metadata!.resourceVersion);
  });

  test('an instance without a uid is refused before anything is written', async () => {
    const name = uniqueName('vc');
    await expect(provisioner().ensure({ namespace, name }, { controllerManager: true })).rejects.toThrow(
      /no uid/,
    );
    expect(await get(RESOURCES.secrets, secretNameOf(name, 'pki'))).toBeUndefined();
  });
});

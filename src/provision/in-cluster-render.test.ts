import { posix } from 'node:path';
import { describe, expect, test } from 'vitest';
import { CONTROL_PLANE_BINARY } from './in-cluster-image.ts';
import {
  componentSecretVolumes,
  IMMUTABLE_DIGEST_ANNOTATION,
  type InClusterRenderInput,
  POD_DATA_DIR,
  podControlPlane,
  renderInCluster,
  statefulSetNameOf,
} from './in-cluster-render.ts';

const instance = { namespace: 'p-team', name: 'dev', uid: '0b8c7c59-3f5e-4b8e-9d55-5a1f1c1e2d3f' };
const input = (over: Partial<InClusterRenderInput> = {}): InClusterRenderInput => ({
  instance,
  controllerManager: true,
  sleeping: false,
  image: 'ghcr.io/cluster-platform/platform:0.1.0',
  ...over,
});

describe('renderInCluster', () => {
  test("each component is a container running the image's control-plane binary with the description's argv, exactly", () => {
    for (const controllerManager of [true, false]) {
      const description = podControlPlane({ instance, controllerManager });
      const pod = renderInCluster(input({ controllerManager })).statefulSet.spec!.template.spec!;
      expect(pod.containers.map((c) => c.name)).toEqual(description.components.map((c) => c.name));
      for (const [i, component] of description.components.entries()) {
        expect(pod.containers[i]!.command).toEqual([CONTROL_PLANE_BINARY]);
        expect(pod.containers[i]!.args).toEqual(component.argv);
      }
    }
  });

  test("each file of a component is mounted at the description's path from the key of its Secret, and nothing else of the Secret", () => {
    const description = podControlPlane({ instance, controllerManager: true });
    const pod = renderInCluster(input()).statefulSet.spec!.template.spec!;
    for (const [i, component] of description.components.entries()) {
      const mounted = pod.containers[i]!.volumeMounts!.flatMap((mount) => {
        const projected = pod.volumes!.find((v) => v.name === mount.name)?.projected;
        if (!projected) return [];
        expect(mount.readOnly).toBe(true);
        return projected.sources!.flatMap((source) =>
          source.secret!.items!.map((item) => ({
            path: posix.join(mount.mountPath, item.path),
            secretName: source.secret!.name,
            key: item.key,
          })),
        );
      });
      expect(mounted).toEqual(
        component.files.map((file) => ({
          path: file.path,
          secretName: description.secretNames[file.secret],
          key: file.key,
        })),
      );
      // What a component writes is under the claim's mount.
      for (const dir of component.dataDirs) expect(dir.startsWith(`${POD_DATA_DIR}/`)).toBe(true);
      expect(pod.containers[i]!.volumeMounts).toContainEqual({ name: 'data', mountPath: POD_DATA_DIR });
    }
  });

  test('the pod is restricted: non-root, no privilege escalation, no capability, RuntimeDefault seccomp, read-only root, no host token', () => {
    const pod = renderInCluster(input()).statefulSet.spec!.template.spec!;
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.hostNetwork ?? false).toBe(false);
    for (const container of pod.containers)
      expect(container.securityContext).toMatchObject({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        privileged: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
    expect(pod.volumes!.every((v) => v.hostPath === undefined)).toBe(true);
  });

  test("the image, its pull policy and pull Secrets are the chart's", () => {
    const pod = renderInCluster(
      input({
        image: 'registry.test/platform@sha256:abc',
        imagePullPolicy: 'Always',
        imagePullSecrets: ['pull'],
      }),
    ).statefulSet.spec!.template.spec!;
    expect(pod.containers.map((c) => [c.image, c.imagePullPolicy])).toEqual(
      pod.containers.map(() => ['registry.test/platform@sha256:abc', 'Always']),
    );
    expect(pod.imagePullSecrets).toEqual([{ name: 'pull' }]);
    expect(renderInCluster(input()).statefulSet.spec!.template.spec!.imagePullSecrets).toBeUndefined();
  });

  test('one replica awake, none asleep; nothing else differs', () => {
    const awake = renderInCluster(input({ sleeping: false }));
    const asleep = renderInCluster(input({ sleeping: true }));
    expect(awake.statefulSet.spec!.replicas).toBe(1);
    expect(asleep.statefulSet.spec!.replicas).toBe(0);
    expect({ ...asleep.statefulSet.spec, replicas: 1 }).toEqual(awake.statefulSet.spec);
    expect(asleep.service).toEqual(awake.service);
  });

  test("the template's resources are the pod's; its storage is the claim's", () => {
    const objects = renderInCluster(
      input({
        template: {
          resources: { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '1Gi' } },
          storage: { size: '5Gi', storageClassName: 'fast' },
        },
      }),
    );
    const spec = objects.statefulSet.spec!;
    expect(spec.template.spec!.resources).toEqual({
      requests: { cpu: '250m', memory: '512Mi' },
      limits: { memory: '1Gi' },
    });
    expect(spec.volumeClaimTemplates!.map((c) => c.spec)).toEqual([
      {
        accessModes: ['ReadWriteOnce'],
        resources: { requests: { storage: '5Gi' } },
        storageClassName: 'fast',
      },
    ]);
    const bare = renderInCluster(input()).statefulSet.spec!;
    expect(bare.template.spec!.resources).toBeUndefined();
    expect(bare.volumeClaimTemplates![0]!.spec!.storageClassName).toBeUndefined();
  });

  test('the immutable digest changes with the storage and not with what may be updated', () => {
    const digest = (over: Partial<InClusterRenderInput>) =>
      renderInCluster(input(over)).statefulSet.metadata!.annotations![IMMUTABLE_DIGEST_ANNOTATION];
    const base = digest({ template: { storage: { size: '1Gi' } } });
    expect(digest({ template: { storage: { size: '2Gi' } } })).not.toBe(base);
    expect(digest({ template: { storage: { size: '1Gi', storageClassName: 'fast' } } })).not.toBe(base);
    expect(
      digest({ template: { storage: { size: '1Gi' }, resources: { limits: { cpu: '2' } } }, sleeping: true }),
    ).toBe(base);
  });

  test('every object is owned by the instance, as its controller', () => {
    const { statefulSet, service } = renderInCluster(input());
    for (const object of [statefulSet, service]) {
      expect(object.metadata!.namespace).toBe(instance.namespace);
      expect(object.metadata!.ownerReferences).toEqual([
        {
          apiVersion: 'management.platform/v1',
          kind: 'VirtualClusterInstance',
          name: instance.name,
          uid: instance.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
    }
  });

  test('files of several directories are one volume each; files of several Secrets in one directory are one volume', () => {
    const component = {
      ...podControlPlane({ instance, controllerManager: false }).components[1]!,
      files: [
        { path: '/a/ca.crt', secret: 'pki', key: 'ca.crt' },
        { path: '/b/ca.key', secret: 'pki', key: 'ca.key' },
        { path: '/a/sa.pub', secret: 'pki', key: 'sa.pub' },
        { path: '/a/kubeconfig', secret: 'admin', key: 'controller-manager.kubeconfig' },
      ],
    } as const;
    const volumes = componentSecretVolumes(component, { pki: 'the-pki', admin: 'the-admin' });
    expect(
      volumes.map(({ volume, mount }) => [
        volume.name,
        mount.mountPath,
        volume.projected?.sources?.map((s) => [
          s.secret?.name,
          s.secret?.items?.map((i) => `${i.key}>${i.path}`),
        ]),
      ]),
    ).toEqual([
      [
        'kube-apiserver-files',
        '/a',
        [
          ['the-pki', ['ca.crt>ca.crt', 'sa.pub>sa.pub']],
          ['the-admin', ['controller-manager.kubeconfig>kubeconfig']],
        ],
      ],
      ['kube-apiserver-files-1', '/b', [['the-pki', ['ca.key>ca.key']]]],
    ]);
  });

  test("no two of a container's mounts share a path, no two volumes a name", () => {
    const pod = renderInCluster(input()).statefulSet.spec!.template.spec!;
    for (const container of pod.containers) {
      const paths = container.volumeMounts!.map((m) => m.mountPath);
      expect(new Set(paths).size).toBe(paths.length);
    }
    const names = pod.volumes!.map((v) => v.name);
    expect(new Set(names).size).toBe(names.length);
  });

  test('the StatefulSet name leaves room for the revision label of its pods (63 characters)', () => {
    for (const length of [1, 40, 49, 50, 63]) {
      const name = statefulSetNameOf('a'.repeat(length));
      expect(name.length + '-'.length + 10).toBeLessThanOrEqual(63);
      expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    }
    expect(statefulSetNameOf(`${'a'.repeat(60)}x`)).not.toBe(statefulSetNameOf(`${'a'.repeat(60)}y`));
  });
});

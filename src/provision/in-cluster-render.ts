import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type {
  V1Container,
  V1OwnerReference,
  V1PersistentVolumeClaim,
  V1PodSpec,
  V1ResourceRequirements,
  V1Secret,
  V1Service,
  V1StatefulSet,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import { GROUP_VERSION } from '../api/meta.ts';
import type { VirtualClusterTemplateSpec } from '../api/virtualclustertemplate.ts';
import {
  type ComponentDescription,
  type ControlPlaneDescription,
  controlPlaneLabelsOf,
  describeControlPlane,
  POD_PORTS,
  type SecretRole,
  secretNameOf,
  selectorLabelsOf,
} from './control-plane.ts';
import { CONTROL_PLANE_BINARY } from './in-cluster-image.ts';

/**
 * The in-cluster provisioner's objects, as pure data: a StatefulSet of one pod (zero asleep)
 * running the platform's image, each component of control-plane.ts's description a container
 * whose args are that component's `argv` exactly, its files the instance's Secrets mounted at the
 * description's paths, its storage a PersistentVolumeClaim from the template; and the Service the
 * syncer and the access proxy dial, named as the serving certificate's names say
 * (`servingNamesOf`: `<instance>.<namespace>.svc`). Everything is owned by the instance.
 */

/** Where the pod mounts the `pki` Secret's files (the description's `pkiDir`). */
const POD_PKI_DIR = '/etc/controlplane/pki';
/** Where the pod mounts its PersistentVolumeClaim (the description's `dataDir`). */
export const POD_DATA_DIR = '/var/lib/controlplane';
/** The root filesystem is read-only; what a component writes besides its data goes here. */
const POD_TMP_DIR = '/tmp';
/** The image's own unprivileged user (the Dockerfile's `USER 1000:1000`). */
const POD_USER = 1000;
/** The claim template's name: the claim of pod 0 is `data-<StatefulSet>-0`. */
const DATA_CLAIM = 'data';
/** Storage of an instance whose template says none. */
const DEFAULT_STORAGE_SIZE = '1Gi';
/** The Service's port (the apiserver listens on POD_PORTS.apiServer behind it). */
export const SERVICE_PORT = 443;
/**
 * The digest of the StatefulSet's fields the apiserver refuses to change (selector,
 * serviceName, volumeClaimTemplates): a StatefulSet whose digest differs from the rendered one is
 * replaced, not updated (in-cluster.ts). A digest, not the fields themselves, because the
 * apiserver rewrites quantities (`1024Mi` reads back `1Gi`).
 */
export const IMMUTABLE_DIGEST_ANNOTATION = 'management.platform/control-plane-immutable-digest';

export interface InClusterRenderInput {
  /** The VirtualClusterInstance: its namespace is where everything is made; its uid owns it. */
  readonly instance: { readonly namespace: string; readonly name: string; readonly uid: string };
  /** The instance's template (`spec.templateRef`), absent when it names none. */
  readonly template?: Pick<VirtualClusterTemplateSpec, 'resources' | 'storage'>;
  /** Run a kube-controller-manager beside the apiserver (control-plane.ts `controllerManager`). */
  readonly controllerManager: boolean;
  /** Asleep: the StatefulSet has no replica; its claim (the storage) stays. */
  readonly sleeping: boolean;
  /** The platform's image (it carries CONTROL_PLANE_BINARY). */
  readonly image: string;
  readonly imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  readonly imagePullSecrets?: readonly string[];
}

export interface InClusterObjects {
  readonly statefulSet: V1StatefulSet;
  readonly service: V1Service;
}

/** The description of the control plane the pod runs: one source with the processes provisioner. */
export function podControlPlane(input: Pick<InClusterRenderInput, 'instance' | 'controllerManager'>) {
  return describeControlPlane({
    namespace: input.instance.namespace,
    name: input.instance.name,
    ports: POD_PORTS,
    pkiDir: POD_PKI_DIR,
    dataDir: POD_DATA_DIR,
    // Every address of the pod, so that its Service reaches the apiserver.
    bindAddress: '0.0.0.0',
    controllerManager: input.controllerManager,
  });
}

/**
 * The StatefulSet's name. A pod's controller-revision-hash label is `<StatefulSet>-<10 characters>`
 * and a label value holds at most 63, so a longer name is cut and made unique by a digest.
 */
export function statefulSetNameOf(instanceName: string): string {
  const name = `vc-${instanceName}`;
  if (name.length <= 52) return name;
  const digest = createHash('sha256').update(instanceName).digest('hex').slice(0, 8);
  return `${name.slice(0, 43).replace(/-+$/, '')}-${digest}`;
}

/** The claim of the StatefulSet's only pod (what `remove` deletes besides the StatefulSet). */
export function dataClaimNameOf(instanceName: string): string {
  return `${DATA_CLAIM}-${statefulSetNameOf(instanceName)}-0`;
}

/** The Service's name: the first label of the serving certificate's `<instance>.<namespace>.svc`. */
export function serviceNameOf(instanceName: string): string {
  return instanceName;
}

/** Where the syncer and the access proxy reach the instance's apiserver. */
export function endpointOf(instance: { namespace: string; name: string }): string {
  return `https://${serviceNameOf(instance.name)}.${instance.namespace}.svc`;
}

export { selectorLabelsOf };

/** The owner reference every object of the instance carries (deleted with it by the garbage collector). */
function instanceOwnerReference(instance: InClusterRenderInput['instance']): V1OwnerReference {
  return {
    apiVersion: GROUP_VERSION,
    kind: 'VirtualClusterInstance',
    name: instance.name,
    uid: instance.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The template's compute resources for the whole pod (pod-level resources: shared by its containers). */
function podResources(template: InClusterRenderInput['template']): V1ResourceRequirements | undefined {
  const { requests, limits } = template?.resources ?? {};
  const compute = (c: typeof requests) =>
    c && (c.cpu !== undefined || c.memory !== undefined)
      ? {
          ...(c.cpu !== undefined ? { cpu: c.cpu } : {}),
          ...(c.memory !== undefined ? { memory: c.memory } : {}),
        }
      : undefined;
  const result = {
    ...(compute(requests) ? { requests: compute(requests) } : {}),
    ...(compute(limits) ? { limits: compute(limits) } : {}),
  };
  return Object.keys(result).length > 0 ? result : undefined;
}

/**
 * A component's files as volumes: one per directory (two mounts at one path are refused), each
 * projecting from the instance's Secrets only the keys the component reads there (etcd reads
 * none; only the controller manager gets the CA's key).
 */
export function componentSecretVolumes(
  component: ComponentDescription,
  secretNames: ControlPlaneDescription['secretNames'],
): Array<{ volume: V1Volume; mount: V1VolumeMount }> {
  const byDir = new Map<string, Array<ComponentDescription['files'][number]>>();
  for (const file of component.files) {
    const dir = posix.dirname(file.path);
    byDir.set(dir, [...(byDir.get(dir) ?? []), file]);
  }
  return [...byDir.entries()].map(([dir, files], index) => {
    const name = `${component.name}-files${index === 0 ? '' : `-${index}`}`;
    const roles = [...new Set(files.map((file) => file.secret))];
    return {
      volume: {
        name,
        projected: {
          // Read by the group the pod's fsGroup gives the files; nobody else.
          defaultMode: 0o440,
          sources: roles.map((role) => ({
            secret: {
              name: secretNames[role],
              items: files
                .filter((file) => file.secret === role)
                .map((file) => ({ key: file.key, path: posix.basename(file.path) })),
            },
          })),
        },
      },
      mount: { name, mountPath: dir, readOnly: true },
    };
  });
}

const restrictedContainerSecurity = {
  runAsNonRoot: true,
  runAsUser: POD_USER,
  runAsGroup: POD_USER,
  allowPrivilegeEscalation: false,
  privileged: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

function claimTemplate(input: InClusterRenderInput): V1PersistentVolumeClaim {
  const storage = input.template?.storage;
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: DATA_CLAIM, labels: controlPlaneLabelsOf(input.instance.name) },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: storage?.size ?? DEFAULT_STORAGE_SIZE } },
      ...(storage?.storageClassName !== undefined ? { storageClassName: storage.storageClassName } : {}),
    },
  };
}

/** The digest of the fields of a StatefulSet spec the apiserver refuses to update. */
function immutableDigestOf(
  spec: Pick<NonNullable<V1StatefulSet['spec']>, 'selector' | 'serviceName' | 'volumeClaimTemplates'>,
): string {
  return createHash('sha256')
    .update(JSON.stringify([spec.selector, spec.serviceName ?? null, spec.volumeClaimTemplates ?? []]))
    .digest('hex')
    .slice(0, 16);
}

/** The metadata of every object of the instance: in its namespace, labelled as its, owned by it. */
function metadataOf(
  instance: InClusterRenderInput['instance'],
  name: string,
  annotations?: Record<string, string>,
) {
  return {
    name,
    namespace: instance.namespace,
    labels: controlPlaneLabelsOf(instance.name),
    ...(annotations ? { annotations } : {}),
    ownerReferences: [instanceOwnerReference(instance)],
  };
}

/** Mounted by every container: the claim (DATA_CLAIM) and the writable scratch directory. */
const DATA_MOUNT: V1VolumeMount = { name: DATA_CLAIM, mountPath: POD_DATA_DIR };
const TMP_MOUNT: V1VolumeMount = { name: 'tmp', mountPath: POD_TMP_DIR };

/** A component's container: the image's binary with the component's argv, its files at `mounts`. */
function containerOf(
  component: ComponentDescription,
  input: InClusterRenderInput,
  mounts: V1VolumeMount[],
): V1Container {
  // The apiserver alone listens beyond loopback (control-plane.ts: bindAddress); the kubelet
  // probes from outside the pod, so only its readiness can be probed, and it covers etcd's
  // (the apiserver's /readyz checks its storage).
  const servesPod = component.readiness.port === POD_PORTS.apiServer;
  return {
    name: component.name,
    image: input.image,
    ...(input.imagePullPolicy ? { imagePullPolicy: input.imagePullPolicy } : {}),
    command: [CONTROL_PLANE_BINARY],
    args: [...component.argv],
    ...(servesPod
      ? {
          ports: [{ name: 'https', containerPort: POD_PORTS.apiServer, protocol: 'TCP' }],
          readinessProbe: {
            httpGet: {
              scheme: component.readiness.scheme,
              port: component.readiness.port,
              path: component.readiness.path,
            },
            periodSeconds: 5,
            failureThreshold: 3,
          },
        }
      : {}),
    volumeMounts: mounts,
    securityContext: restrictedContainerSecurity,
  };
}

/** The pod's spec: a container per component, restricted, with no credential of the host cluster. */
function podSpecOf(input: InClusterRenderInput, description: ControlPlaneDescription): V1PodSpec {
  const volumes: V1Volume[] = [{ name: TMP_MOUNT.name, emptyDir: {} }];
  const containers = description.components.map((component) => {
    const secretVolumes = componentSecretVolumes(component, description.secretNames);
    volumes.push(...secretVolumes.map((v) => v.volume));
    return containerOf(component, input, [DATA_MOUNT, TMP_MOUNT, ...secretVolumes.map((v) => v.mount)]);
  });
  const resources = podResources(input.template);
  return {
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: POD_USER,
      runAsGroup: POD_USER,
      fsGroup: POD_USER,
      fsGroupChangePolicy: 'OnRootMismatch',
      seccompProfile: { type: 'RuntimeDefault' },
    },
    ...(resources ? { resources } : {}),
    ...(input.imagePullSecrets?.length
      ? { imagePullSecrets: input.imagePullSecrets.map((name) => ({ name })) }
      : {}),
    containers,
    volumes,
  };
}

function statefulSetOf(input: InClusterRenderInput, description: ControlPlaneDescription): V1StatefulSet {
  const { instance } = input;
  const selector = { matchLabels: selectorLabelsOf(instance.name) };
  const serviceName = serviceNameOf(instance.name);
  const volumeClaimTemplates = [claimTemplate(input)];
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: metadataOf(instance, statefulSetNameOf(instance.name), {
      [IMMUTABLE_DIGEST_ANNOTATION]: immutableDigestOf({ selector, serviceName, volumeClaimTemplates }),
    }),
    spec: {
      replicas: input.sleeping ? 0 : 1,
      selector,
      serviceName,
      // The claim goes with the StatefulSet (remove), never with a scale to zero (sleep).
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Delete', whenScaled: 'Retain' },
      volumeClaimTemplates,
      template: {
        metadata: { labels: controlPlaneLabelsOf(instance.name) },
        spec: podSpecOf(input, description),
      },
    },
  };
}

function serviceOf(instance: InClusterRenderInput['instance']): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: metadataOf(instance, serviceNameOf(instance.name)),
    spec: {
      type: 'ClusterIP',
      selector: selectorLabelsOf(instance.name),
      ports: [{ name: 'https', port: SERVICE_PORT, targetPort: 'https', protocol: 'TCP' }],
    },
  };
}

export function renderInCluster(input: InClusterRenderInput): InClusterObjects {
  return { statefulSet: statefulSetOf(input, podControlPlane(input)), service: serviceOf(input.instance) };
}

/**
 * The instance's Secrets (control-plane.ts `secretNameOf`) holding `material` (pki.ts's plain
 * text per key) as their data, owned by the instance like everything else of it.
 */
export function renderSecrets(
  instance: InClusterRenderInput['instance'],
  material: Readonly<Record<SecretRole, Readonly<Record<string, string>>>>,
): Record<SecretRole, V1Secret> {
  const secretOf = (role: SecretRole): V1Secret => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: metadataOf(instance, secretNameOf(instance.name, role)),
    type: 'Opaque',
    data: Object.fromEntries(
      Object.entries(material[role]).map(([key, text]) => [key, Buffer.from(text).toString('base64')]),
    ),
  });
  return { pki: secretOf('pki'), admin: secretOf('admin') };
}

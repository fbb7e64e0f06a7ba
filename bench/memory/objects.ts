import { createHash } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import { resources } from '../../src/api/resources.ts';
import type { ResourceRef } from '../../src/runtime/kube-client.ts';

/**
 * The objects bench/memory caches: of each kind, objects the size and shape a production cluster
 * holds (labels and annotations as tools set them, a few KiB of data, several addresses), each
 * with its own content (no two share a string a parser could intern).
 */

export const NAMESPACE = 'bench-memory';

export interface BenchKind {
  readonly name: string;
  readonly resource: ResourceRef;
  readonly object: (i: number) => KubernetesObject;
}

/** `bytes` of text unique to (`seed`, `i`): base64 of chained SHA-256 digests. */
function uniqueText(seed: string, i: number, bytes: number): string {
  let text = '';
  for (let block = 0; text.length < bytes; block++)
    text += createHash('sha256').update(`${seed}/${i}/${block}`).digest('base64');
  return text.slice(0, bytes);
}

const base64 = (text: string) => Buffer.from(text).toString('base64');

/** What deployment tools put on every object (Helm, Argo CD). */
function toolLabels(app: string, i: number): Record<string, string> {
  return {
    app,
    'app.kubernetes.io/name': app,
    'app.kubernetes.io/instance': `${app}-${i % 40}`,
    'app.kubernetes.io/part-of': `suite-${i % 7}`,
    'app.kubernetes.io/managed-by': 'Helm',
  };
}

const core = (plural: string): ResourceRef => ({ group: '', version: 'v1', plural, namespaced: true });

const metadata = (name: string, app: string, i: number) => ({
  name,
  namespace: NAMESPACE,
  labels: toolLabels(app, i),
  annotations: {
    'meta.helm.sh/release-name': `${app}-${i % 40}`,
    'meta.helm.sh/release-namespace': NAMESPACE,
  },
});

export const benchKinds: readonly BenchKind[] = [
  {
    name: 'Secret',
    resource: core('secrets'),
    object: (i) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: metadata(`secret-${i}`, `db-${i}`, i),
      type: 'Opaque',
      data: {
        username: base64(`user-${i}`),
        password: base64(uniqueText('password', i, 32)),
        'config.json': base64(
          JSON.stringify({
            url: `postgres://db-${i}.${NAMESPACE}:5432/app`,
            token: uniqueText('token', i, 900),
          }),
        ),
      },
    }),
  },
  {
    name: 'ConfigMap',
    resource: core('configmaps'),
    object: (i) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: metadata(`config-${i}`, `web-${i}`, i),
      data: {
        'application.yaml': `server:\n  port: 8080\n  name: web-${i}\nfeatures: ${uniqueText('config', i, 1200)}\n`,
        LOG_LEVEL: i % 2 ? 'info' : 'debug',
        REPLICAS: String(1 + (i % 5)),
      },
    }),
  },
  {
    name: 'Service',
    resource: core('services'),
    object: (i) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: metadata(`svc-${i}`, `web-${i}`, i),
      // Headless: the bench apiserver's service range is too small for thousands of ClusterIPs.
      spec: {
        clusterIP: 'None',
        ports: [
          { name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' },
          { name: 'metrics', port: 9090, targetPort: 9090, protocol: 'TCP' },
        ],
      },
    }),
  },
  {
    name: 'Endpoints',
    resource: core('endpoints'),
    object: (i) => ({
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: metadata(`svc-${i}`, `web-${i}`, i),
      subsets: [
        {
          addresses: [0, 1, 2].map((replica) => ({
            ip: `10.${100 + replica}.${Math.floor(i / 250) % 250}.${(i % 250) + 1}`,
            nodeName: `node-${(i + replica) % 50}`,
            targetRef: { kind: 'Pod', name: `web-${i}-${replica}`, namespace: NAMESPACE },
          })),
          ports: [
            { name: 'http', port: 8080, protocol: 'TCP' },
            { name: 'metrics', port: 9090, protocol: 'TCP' },
          ],
        },
      ],
    }),
  },
  {
    name: 'OwnedAccessKey',
    resource: resources.ownedAccessKeys,
    object: (i) => ({
      apiVersion: 'management.platform/v1',
      kind: 'OwnedAccessKey',
      metadata: { name: `key-${i}`, labels: { 'platform.io/user': `user-${i % 500}` } },
      spec: {
        displayName: `CI key ${i}`,
        user: `user-${i % 500}`,
        type: 'User',
        keyId: uniqueText('key-id', i, 16).replace(/[^a-zA-Z0-9]/g, 'x'),
        keyHash: createHash('sha256').update(`key/${i}`).digest('hex'),
        groups: ['ci', `team-${i % 30}`],
      },
    }),
  },
  {
    name: 'SharedSecret',
    resource: resources.sharedSecrets,
    object: (i) => ({
      apiVersion: 'management.platform/v1',
      kind: 'SharedSecret',
      metadata: { name: `shared-${i}`, namespace: NAMESPACE, labels: toolLabels(`shared-${i}`, i) },
      spec: {
        data: { token: base64(uniqueText('shared', i, 64)), url: base64(`https://api-${i}.example.com`) },
        access: [
          { name: 'readers', verbs: ['get'], users: [`user-${i % 500}`], teams: ['readers'] },
          { name: 'writers', verbs: ['get', 'update'], teams: [`team-${i % 30}`] },
        ],
      },
    }),
  },
];

/** What the second field manager sets on every object, so managedFields hold two entries. */
export function secondManagerPatch(object: KubernetesObject): KubernetesObject {
  const { name, namespace } = object.metadata ?? {};
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: {
      name,
      ...(namespace ? { namespace } : {}),
      labels: { 'policy.example.com/audited': 'true' },
      annotations: { 'policy.example.com/last-audit': '2026-11-01T00:00:00Z' },
    },
  };
}

import type { KubernetesObject } from '@kubernetes/client-node';
import pino from 'pino';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Informer } from '../../src/runtime/informer.ts';
import type { KubeClient, ResourceRef } from '../../src/runtime/kube-client.ts';
import { LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import type { KubeObject } from '../../src/sync/sync-context.ts';
import { VC } from './setting.ts';

/** What the sync benchmark writes (headless Services with their Endpoints) and how it sees the host. */

export const services: ResourceRef = { group: '', version: 'v1', plural: 'services', namespaced: true };
export const endpoints: ResourceRef = { group: '', version: 'v1', plural: 'endpoints', namespaced: true };

/** The address of Endpoints `i` in its `generation`th version. */
export const ip = (i: number, generation = 0) =>
  `10.${100 + (generation % 150)}.${Math.floor(i / 250)}.${(i % 250) + 1}`;

export function pair(i: number, generation = 0): { service: KubeObject; endpoints: KubeObject } {
  const name = `svc-${i}`;
  return {
    service: {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: 'apps', labels: { app: name } },
      // Headless: the bench apiservers' service range is a /24, too small for 2,000 ClusterIPs.
      spec: { clusterIP: 'None', ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
    },
    endpoints: {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name, namespace: 'apps', labels: { app: name } },
      subsets: [
        {
          addresses: [
            { ip: ip(i, generation), targetRef: { kind: 'Pod', name: `${name}-0`, namespace: 'apps' } },
          ],
          ports: [{ name: 'http', port: 8080 }],
        },
      ],
    },
  };
}

const quiet = pino({ level: 'silent' });

/** Counts the objects of a host namespace (labelled managed-by) and reports changes. */
export function watchHost(api: KubeClient, resource: ResourceRef, namespace: string) {
  const informer = new Informer<KubernetesObject>({
    api,
    resource,
    namespace,
    labelSelector: `${LABEL_MANAGED_BY}=${VC}`,
    clock: systemClock,
    random: systemRandom,
    logger: quiet,
  });
  const listeners = new Set<(obj: KubeObject) => void>();
  const notify = (obj: KubernetesObject) => {
    for (const listener of listeners) listener(obj as unknown as KubeObject);
  };
  informer.addEventHandler({ onAdd: notify, onUpdate: (_old, obj) => notify(obj) });
  informer.start();
  return {
    informer,
    count: () => informer.store.size,
    /** Resolves when an object satisfying `check` is seen (now or later). */
    until(check: (obj: KubeObject) => boolean): Promise<void> {
      return new Promise((resolve) => {
        const listener = (obj: KubeObject) => {
          if (!check(obj)) return;
          listeners.delete(listener);
          resolve();
        };
        listeners.add(listener);
        for (const obj of informer.store.list()) listener(obj as unknown as KubeObject);
      });
    },
  };
}

export type HostWatch = ReturnType<typeof watchHost>;

/** The raw namespace holds objects with the same labels; watch it the same way. */
export function watchHostAll(api: KubeClient, namespace: string) {
  return watchHost(api, endpoints, namespace);
}

import type { V1StatefulSet } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { needsReplacement, statusOf } from './in-cluster.ts';
import { renderInCluster } from './in-cluster-render.ts';

const instance = { namespace: 'p-team', name: 'dev', uid: 'uid-1' };
const rendered = (storage: string) =>
  renderInCluster({
    instance,
    template: { storage: { size: storage } },
    controllerManager: false,
    sleeping: false,
    image: 'platform:test',
  }).statefulSet;

describe('statusOf', () => {
  const statefulSet = (spec: { replicas: number; generation: number }, status: V1StatefulSet['status']) =>
    ({
      metadata: { generation: spec.generation },
      spec: { replicas: spec.replicas },
      status,
    }) as V1StatefulSet;

  /** What the StatefulSet controller counted: one replica, `ready` of them ready, at `generation`. */
  const counted = (ready: number, generation: number) => ({
    replicas: 1,
    readyReplicas: ready,
    observedGeneration: generation,
  });
  const wanted = (replicas: number, generation: number) => ({ replicas, generation });

  test.each([
    ['zero replicas', wanted(0, 3), counted(1, 2), 'Stopped'],
    ['a ready replica counted at the current generation', wanted(1, 3), counted(1, 3), 'Ready'],
    ['a ready replica counted at an older generation', wanted(1, 3), counted(1, 2), 'Starting'],
    ['no ready replica', wanted(1, 3), counted(0, 3), 'Starting'],
    ['no status yet', wanted(1, 1), undefined, 'Starting'],
  ] as const)('%s: %s', (_, spec, status, phase) => {
    const result = statusOf(instance, statefulSet(spec, status), 'CA PEM');
    expect(result.phase).toBe(phase);
    expect(result.endpoint).toBe('https://dev.p-team.svc');
    expect(result.adminSecretName).toBe('vc-dev-admin');
    expect(Buffer.from(result.caData!, 'base64').toString()).toBe('CA PEM');
  });
});

describe('needsReplacement', () => {
  test('a StatefulSet whose claim template differs is replaced; one that does not, or only in what may be updated, is not', () => {
    expect(needsReplacement(rendered('1Gi'), rendered('2Gi'))).toBe(true);
    expect(needsReplacement(rendered('1Gi'), rendered('1Gi'))).toBe(false);
    const resized = renderInCluster({
      instance,
      template: { storage: { size: '1Gi' }, resources: { limits: { cpu: '2' } } },
      controllerManager: true,
      sleeping: true,
      image: 'platform:other',
    }).statefulSet;
    expect(needsReplacement(rendered('1Gi'), resized)).toBe(false);
    // One made before the annotation existed (none) is replaced once.
    const unannotated = { ...rendered('1Gi'), metadata: { ...rendered('1Gi').metadata, annotations: {} } };
    expect(needsReplacement(unannotated, rendered('1Gi'))).toBe(true);
  });
});

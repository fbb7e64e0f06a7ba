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

  test.each([
    [
      'zero replicas',
      { replicas: 0, generation: 3 },
      { replicas: 1, readyReplicas: 1, observedGeneration: 2 },
      'Stopped',
    ],
    [
      'a ready replica counted at the current generation',
      { replicas: 1, generation: 3 },
      { replicas: 1, readyReplicas: 1, observedGeneration: 3 },
      'Ready',
    ],
    [
      'a ready replica counted at an older generation',
      { replicas: 1, generation: 3 },
      { replicas: 1, readyReplicas: 1, observedGeneration: 2 },
      'Starting',
    ],
    [
      'no ready replica',
      { replicas: 1, generation: 3 },
      { replicas: 1, readyReplicas: 0, observedGeneration: 3 },
      'Starting',
    ],
    ['no status yet', { replicas: 1, generation: 1 }, undefined, 'Starting'],
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

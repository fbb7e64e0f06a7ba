import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  CONTROL_PLANE_KUBERNETES_VERSION,
  QUANTITY_PATTERN,
  VirtualClusterTemplateSchema,
} from './virtualclustertemplate.ts';

const template = (spec: Record<string, unknown>) => ({
  apiVersion: 'management.platform/v1',
  kind: 'VirtualClusterTemplate',
  metadata: { name: 'small' },
  spec,
});

describe('VirtualClusterTemplate', () => {
  it('names the Kubernetes version the control-plane binary is built from', () => {
    const goMod = readFileSync(new URL('../../hack/controlplane/go.mod', import.meta.url), 'utf8');
    const built = /^\s*k8s\.io\/kubernetes (v\S+)$/m.exec(goMod)?.[1];
    expect(built).toBe(CONTROL_PLANE_KUBERNETES_VERSION);
  });

  it.each(['500m', '2', '1.5', '.5', '512Mi', '10Gi', '1e3', '1E-2', '100k', '4Ti'])(
    'accepts the quantity %s',
    (quantity) => expect(QUANTITY_PATTERN.test(quantity)).toBe(true),
  );

  it.each(['', '-1', '+1', '1 Gi', '10GB', 'Gi', '1.2.3', '10gi', '1e'])(
    'refuses the quantity %j',
    (quantity) => expect(QUANTITY_PATTERN.test(quantity)).toBe(false),
  );

  it.each([
    [{}, true],
    [
      {
        kubernetesVersion: CONTROL_PLANE_KUBERNETES_VERSION,
        resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '1Gi' } },
        storage: { size: '5Gi', storageClassName: 'fast' },
        config: 'sync:\n  toHost: {}\n',
      },
      true,
    ],
    [{ kubernetesVersion: 'v1.30.0' }, false],
    [{ storage: {} }, false],
    [{ storage: { size: '5 GB' } }, false],
    [{ resources: { requests: { cpu: 2 } } }, false],
  ])('spec %j valid: %s', (spec, valid) => {
    expect(VirtualClusterTemplateSchema.safeParse(template(spec)).success).toBe(valid);
  });
});

import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  placementLookups,
  templateToCheck,
  validateTemplateRef,
  validateVirtualClusterInstance,
} from './virtualclusterinstance.ts';

const projectOf = (namespace: string) => (namespace.startsWith('p-team') ? 'team' : undefined);
const object = (spec: Record<string, unknown>) => ({
  apiVersion: 'management.platform/v1',
  kind: 'VirtualClusterInstance',
  metadata: { name: 'dev', namespace: 'p-team' },
  spec,
});
const toKubeSystem = object({
  clusterRef: { cluster: 'local', namespace: 'kube-system', virtualCluster: 'x' },
});

describe('validateVirtualClusterInstance: placement', () => {
  it('refuses a host namespace outside the project with the field named (422, causes)', () => {
    const decision = validateVirtualClusterInstance(undefined, toKubeSystem, projectOf);
    expect(decision.allowed).toBe(false);
    expect(decision.code).toBe(422);
    expect(decision.causes).toEqual([expect.objectContaining({ field: 'spec.clusterRef.namespace' })]);
  });

  it('asks about the namespaces it names, only when the placement changes', () => {
    expect(placementLookups(undefined, toKubeSystem)).toEqual(['p-team', 'kube-system']);
    expect(
      placementLookups(toKubeSystem, {
        ...toKubeSystem,
        metadata: { ...toKubeSystem.metadata, labels: { a: 'b' } },
      }),
    ).toEqual([]);
    const config = stringify({
      sync: { toHost: { namespaces: { enabled: true, mappings: { byName: { a: 'other' } } } } },
    });
    expect(placementLookups(object({}), object({ config }))).toEqual(['p-team', 'other']);
  });

  it('an unchanged placement is not checked again (finalizer removal stays possible)', () => {
    expect(validateVirtualClusterInstance(toKubeSystem, toKubeSystem, projectOf).allowed).toBe(true);
  });

  it('configuration errors and placement problems are reported together', () => {
    const config = stringify({
      sync: { toHost: { namespaces: { enabled: true, mappings: { byName: { 'a-*': 'b-*' } } } } },
    });
    const decision = validateVirtualClusterInstance(
      undefined,
      object({ config: `${config}\nbad: [` }),
      projectOf,
    );
    expect(decision.causes?.map((c) => c.field)).toEqual(['spec.config']);
    const patterned = validateVirtualClusterInstance(undefined, object({ config }), projectOf);
    expect(patterned.causes?.[0]?.message).toContain('a pattern');
  });
});

describe('validateTemplateRef', () => {
  const provisioned = object({ templateRef: { name: 'small' } });

  it('looks up the template a new instance names, and nothing on update or for a registered instance', () => {
    expect(templateToCheck(undefined, provisioned)).toBe('small');
    expect(templateToCheck(provisioned, provisioned)).toBeUndefined();
    expect(templateToCheck(undefined, object({ endpoint: 'https://vc.example' }))).toBeUndefined();
  });

  it('refuses a new instance naming a template that does not exist: 422 naming spec.templateRef.name', () => {
    const decision = validateTemplateRef(undefined, provisioned, false);
    expect(decision).toMatchObject({ allowed: false, code: 422, reason: 'Invalid' });
    expect(decision.causes).toEqual([
      expect.objectContaining({ field: 'spec.templateRef.name', reason: 'FieldValueNotFound' }),
    ]);
    expect(decision.message).toContain('VirtualClusterTemplate "small" does not exist');
  });

  it('admits one naming a template that exists, and an update whatever became of its template', () => {
    expect(validateTemplateRef(undefined, provisioned, true).allowed).toBe(true);
    expect(validateTemplateRef(provisioned, provisioned, undefined).allowed).toBe(true);
  });
});

import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { keepManagedFieldsOf } from './informer.ts';

const entry = (manager: string) => ({
  manager,
  operation: 'Apply',
  apiVersion: 'v1',
  fieldsType: 'FieldsV1',
  fieldsV1: { 'f:data': { [`f:${manager}`]: {} } },
});

const object = (): KubernetesObject & { data: Record<string, string> } => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: 'x',
    namespace: 'ns',
    uid: 'u',
    resourceVersion: '7',
    labels: { app: 'web' },
    managedFields: [entry('one'), entry('two'), entry('three')],
  },
  data: { a: '1' },
});

describe('keepManagedFieldsOf', () => {
  it('drops every managedFields entry by default and keeps the rest of the object', () => {
    const { managedFields: _dropped, ...metadata } = object().metadata!;
    expect(keepManagedFieldsOf([])(object())).toEqual({ ...object(), metadata });
    expect(keepManagedFieldsOf([])(object()).metadata).not.toHaveProperty('managedFields');
  });

  it('keeps the entries of the named managers, in their order', () => {
    const kept = keepManagedFieldsOf(['three', 'one', 'absent'])(object());
    expect(kept.metadata?.managedFields).toEqual([entry('one'), entry('three')]);
    expect(keepManagedFieldsOf(['absent'])(object()).metadata).not.toHaveProperty('managedFields');
  });

  it('leaves the object it is given as it was', () => {
    const given = object();
    keepManagedFieldsOf(['one'])(given);
    expect(given).toEqual(object());
  });

  it('returns an object without managedFields as it is', () => {
    const { managedFields: _dropped, ...metadata } = object().metadata!;
    const bare = { ...object(), metadata };
    expect(keepManagedFieldsOf([])(bare)).toBe(bare);
  });
});

import type { V1Secret } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import type { SharedSecret } from '../../api/sharedsecret.ts';
import { desiredSecretData, syncSourceOf } from './desired.ts';

const shared: SharedSecret = {
  apiVersion: 'management.platform/v1',
  kind: 'SharedSecret',
  metadata: { name: 'db', namespace: 'platform' },
  spec: { data: { user: 'YWRtaW4=', password: 'aHVudGVyMg==', host: 'ZGI=' } },
};
const target = (labels: Record<string, string>, annotations: Record<string, string> = {}): V1Secret => ({
  metadata: { name: 'db-copy', namespace: 'app', labels, annotations },
});
const both = {
  'management.platform/sharedsecret-name': 'db',
  'management.platform/sharedsecret-namespace': 'platform',
};

describe('syncSourceOf', () => {
  test.each([
    ['both labels', both, {}, { namespace: 'platform', name: 'db' }],
    ['name only', { 'management.platform/sharedsecret-name': 'db' }, {}, undefined],
    ['namespace only', { 'management.platform/sharedsecret-namespace': 'platform' }, {}, undefined],
    ['no labels', {}, {}, undefined],
    ['sync disabled', both, { 'management.platform/disable-sync': 'true' }, undefined],
    ["a virtual cluster's host copy", { ...both, 'vcluster.platform/managed-by': 'dev' }, {}, undefined],
  ])('%s', (_, labels, annotations, expected) => {
    expect(syncSourceOf(target(labels, annotations))).toEqual(expected);
  });
});

describe('desiredSecretData', () => {
  test('all keys by default', () => {
    expect(desiredSecretData(target(both), shared)).toEqual({
      data: { host: 'ZGI=', password: 'aHVudGVyMg==', user: 'YWRtaW4=' },
      missingKeys: [],
    });
  });

  test('only the keys the annotation lists, and the listed keys that do not exist are reported', () => {
    const result = desiredSecretData(
      target(both, { 'management.platform/sharedsecret-keys': ' password, user ,nope,password' }),
      shared,
    );
    expect(result).toEqual({ data: { password: 'aHVudGVyMg==', user: 'YWRtaW4=' }, missingKeys: ['nope'] });
  });

  test('keys named like Object.prototype members are keys: copied when present, missing when not', () => {
    const hostile: SharedSecret = {
      ...shared,
      spec: { data: JSON.parse('{"__proto__": "cHJvdG8=", "toString": "c3RyaW5n"}') },
    };
    const result = desiredSecretData(
      target(both, { 'management.platform/sharedsecret-keys': '__proto__,constructor,toString,valueOf' }),
      hostile,
    );
    expect(JSON.stringify(result.data)).toBe('{"__proto__":"cHJvdG8=","toString":"c3RyaW5n"}');
    expect(result.missingKeys).toEqual(['constructor', 'valueOf']);
    expect(JSON.stringify(desiredSecretData(target(both), hostile).data)).toBe(
      '{"__proto__":"cHJvdG8=","toString":"c3RyaW5n"}',
    );
  });

  test('a SharedSecret without data gives an empty Secret', () => {
    expect(desiredSecretData(target(both), { ...shared, spec: {} }).data).toEqual({});
  });
});

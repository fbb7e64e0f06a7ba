import { describe, expect, it } from 'vitest';
import { VirtualClusterInstanceSchema } from './virtualclusterinstance.ts';

const instance = (spec: Record<string, unknown>) => ({
  apiVersion: 'management.platform/v1',
  kind: 'VirtualClusterInstance',
  metadata: { name: 'dev', namespace: 'p-web' },
  spec,
});

/** The paths zod reports for an invalid spec (empty when it is valid). */
const problems = (spec: Record<string, unknown>) =>
  (VirtualClusterInstanceSchema.safeParse(instance(spec)).error?.issues ?? []).map((issue) =>
    issue.path.join('.'),
  );

describe('VirtualClusterInstance spec', () => {
  it.each([
    ['a registered instance', { endpoint: 'https://dev.example.com', credentialsSecretRef: { name: 'c' } }],
    ['a provisioned instance', { templateRef: { name: 'small' }, sleepAfter: 600, deleteAfter: 0 }],
    [
      'a provisioned instance with its own configuration',
      { templateRef: { name: 'small' }, config: 'sync: {}' },
    ],
  ])('accepts %s', (_what, spec) => {
    expect(problems(spec)).toEqual([]);
  });

  it.each([
    ['neither endpoint nor templateRef', {}, 'spec.templateRef'],
    [
      'both endpoint and templateRef',
      { endpoint: 'https://a.example.com', templateRef: { name: 's' } },
      'spec.templateRef',
    ],
    [
      'credentials for a provisioned instance',
      { templateRef: { name: 's' }, credentialsSecretRef: { name: 'c' } },
      'spec.credentialsSecretRef',
    ],
    ['an empty template name', { templateRef: { name: '' } }, 'spec.templateRef.name'],
    ['a negative sleepAfter', { templateRef: { name: 's' }, sleepAfter: -1 }, 'spec.sleepAfter'],
    ['a fractional deleteAfter', { templateRef: { name: 's' }, deleteAfter: 1.5 }, 'spec.deleteAfter'],
    ['a deleteAfter past int32', { templateRef: { name: 's' }, deleteAfter: 2 ** 31 }, 'spec.deleteAfter'],
  ])('refuses %s at %s', (_what, spec, path) => {
    expect(problems(spec)).toContain(path);
  });

  it('keeps status.sleepingSince as an RFC 3339 UTC time', () => {
    const withStatus = (sleepingSince: string) => ({
      ...instance({ templateRef: { name: 's' } }),
      status: { sleepingSince },
    });
    expect(VirtualClusterInstanceSchema.safeParse(withStatus('2026-11-27T14:00:00Z')).success).toBe(true);
    expect(VirtualClusterInstanceSchema.safeParse(withStatus('yesterday')).success).toBe(false);
  });

  it('keeps status.lastActivity as an RFC 3339 UTC time, milliseconds allowed', () => {
    const withStatus = (lastActivity: string) => ({
      ...instance({ templateRef: { name: 's' } }),
      status: { lastActivity },
    });
    expect(VirtualClusterInstanceSchema.safeParse(withStatus('2026-11-27T14:00:00.123Z')).success).toBe(true);
    expect(VirtualClusterInstanceSchema.safeParse(withStatus('2026-11-27T14:00:00+01:00')).success).toBe(
      false,
    );
  });
});

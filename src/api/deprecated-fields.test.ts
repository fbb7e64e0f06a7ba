import { describe, expect, it } from 'vitest';
import { deprecatedFieldWarnings } from './deprecated-fields.ts';

const key = (spec: Record<string, unknown>) => ({
  apiVersion: 'management.platform/v1',
  kind: 'OwnedAccessKey',
  metadata: { name: 'k' },
  spec,
});

describe('warnings for deprecated OwnedAccessKey fields', () => {
  it('names spec.parent and spec.oidcLogin when set, each once, and what to use instead', () => {
    const warnings = deprecatedFieldWarnings(
      key({ user: 'alice', parent: 'other-key', oidcLogin: { lastRefresh: '2026-01-01T00:00:00Z' } }),
    );
    expect(warnings.map((w) => w.slice(0, w.indexOf(':')))).toEqual(['spec.parent', 'spec.oidcLogin']);
    for (const warning of warnings)
      expect(warning).toContain(': deprecated; has no effect in this platform (');
    expect(warnings[1]).toContain('use spec.identity');
  });

  it('says nothing about a key without them, or with them null', () => {
    expect(deprecatedFieldWarnings(key({ user: 'alice', identity: { username: 'alice' } }))).toEqual([]);
    expect(deprecatedFieldWarnings(key({ parent: null, oidcLogin: null }))).toEqual([]);
    expect(deprecatedFieldWarnings({ metadata: { name: 'no-spec' } })).toEqual([]);
    expect(deprecatedFieldWarnings(undefined)).toEqual([]);
  });

  it('warns about an empty value too: the field is set, and still does nothing', () => {
    expect(deprecatedFieldWarnings(key({ parent: '', oidcLogin: {} }))).toHaveLength(2);
  });

  it('never quotes a value: the tokens of oidcLogin stay out of the warning', () => {
    const warnings = deprecatedFieldWarnings(
      key({
        parent: 'parent-name-value',
        oidcLogin: { idToken: 'id-token-value', accessToken: 'access-value', refreshToken: 'refresh-value' },
      }),
    );
    const text = warnings.join('\n');
    for (const secret of ['parent-name-value', 'id-token-value', 'access-value', 'refresh-value'])
      expect(text).not.toContain(secret);
  });
});

import { describe, expect, it } from 'vitest';
import { isNamespaceName, isObjectName } from './names.ts';

describe('names', () => {
  it('a namespace name is an RFC 1123 label of at most 63 characters', () => {
    for (const name of ['a', 'team-a', '0', `a${'b'.repeat(62)}`])
      expect(isNamespaceName(name), name).toBe(true);
    for (const name of ['', 'Team', '-a', 'a-', 'a.b', 'a_b', `a${'b'.repeat(63)}`])
      expect(isNamespaceName(name), name).toBe(false);
  });

  it('an object name is an RFC 1123 subdomain of at most 253 characters', () => {
    for (const name of ['a', 'alice', 'alice.example.com', 'a-1.b-2', 'a'.repeat(253)])
      expect(isObjectName(name), name).toBe(true);
    for (const name of ['', 'Alice', '.a', 'a.', 'a..b', '-a.b', 'a_b', 'a/b', 'a'.repeat(254)])
      expect(isObjectName(name), name).toBe(false);
  });
});

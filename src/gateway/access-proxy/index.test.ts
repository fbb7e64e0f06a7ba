import { describe, expect, test } from 'vitest';
import { callerImpersonationRefusal } from './index.ts';

/** A proxied request carrying impersonation headers of its own is refused, naming them. */

describe('callerImpersonationRefusal', () => {
  test('every Impersonate-* header, in any case, refuses the request with a 403 naming each once', () => {
    const refusal = callerImpersonationRefusal([
      'Accept',
      'application/json',
      'Impersonate-User',
      'admin',
      'IMPERSONATE-GROUP',
      'system:masters',
      'impersonate-group',
      'other',
      'Impersonate-Uid',
      '0',
      'Impersonate-Extra-Scopes',
      'all',
    ]);
    expect(refusal?.code).toBe(403);
    expect(refusal?.reason).toBe('Forbidden');
    expect(refusal?.message).toContain(
      '(impersonate-user, impersonate-group, impersonate-uid, impersonate-extra-scopes)',
    );
  });

  test('a request without them passes', () => {
    expect(callerImpersonationRefusal(['Accept', 'application/json', 'X-Impersonate', 'no'])).toBeUndefined();
  });

  test('a header name the caller made up is named sanitized and bounded', () => {
    const refusal = callerImpersonationRefusal([`Impersonate-Extra-${'x'.repeat(500)}`, 'v']);
    expect(refusal?.message.length).toBeLessThan(300);
  });
});

import { describe, expect, it } from 'vitest';
import {
  OIDC_EXPIRES_AT_ANNOTATION,
  OIDC_MODEL_LABEL,
  OIDC_STATE_SECRET_TYPE,
  stateExpiresAt,
  statePayload,
  stateSecret,
  stateSecretName,
} from './secret-models.ts';

describe('an OpenID provider entry as a Secret', () => {
  const code = 'Xq0-very-secret-authorization-code';
  const secret = stateSecret({
    model: 'AuthorizationCode',
    id: code,
    namespace: 'platform',
    payload: { grantId: 'grant-1', uid: 'uid-1', accountId: 'alice' },
    expiresAt: Date.parse('2026-11-27T12:00:00Z'),
  });

  it('is named and labelled by hashes, never by the id, grant or uid themselves', () => {
    expect(secret.metadata.name).toBe(stateSecretName('AuthorizationCode', code));
    expect(secret.metadata.name).toMatch(/^oidc-authorizationcode-[0-9a-f]{40}$/);
    expect(secret.metadata.labels?.[OIDC_MODEL_LABEL]).toBe('authorizationcode');
    const metadata = JSON.stringify(secret.metadata);
    for (const value of [code, 'grant-1', 'uid-1']) expect(metadata).not.toContain(value);
    expect(secret.type).toBe(OIDC_STATE_SECRET_TYPE);
    expect(secret.metadata.annotations?.[OIDC_EXPIRES_AT_ANNOTATION]).toBe('2026-11-27T12:00:00.000Z');
  });

  it('answers its payload until it expires, and nothing for another type or an unreadable one', () => {
    const before = Date.parse('2026-11-27T11:59:59Z');
    expect(statePayload(secret, before)).toEqual({ grantId: 'grant-1', uid: 'uid-1', accountId: 'alice' });
    expect(statePayload(secret, stateExpiresAt(secret))).toBeUndefined();
    expect(statePayload({ ...secret, type: 'Opaque' }, before)).toBeUndefined();
    expect(
      statePayload({ ...secret, data: { payload: Buffer.from('[1]').toString('base64') } }, before),
    ).toBeUndefined();
    expect(statePayload({ ...secret, data: { payload: 'not json' } }, before)).toBeUndefined();
    const noExpiry = { ...secret, metadata: { ...secret.metadata, annotations: {} } };
    expect(stateExpiresAt(noExpiry)).toBe(0);
  });
});

import * as crypto from 'node:crypto';
import { ApiException } from '@kubernetes/client-node';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_PLATFORM_CONFIG } from '../config/platform-config.ts';
import type { KubeApi, RequestOptions } from '../runtime/kube-api.ts';
import { hashPassword, PASSWORD_HASH_PARAMS } from './password.ts';
import { InvalidCredentials, LoginService } from './service.ts';
import { LoginThrottle } from './throttle.ts';

/**
 * docs/login.md: "Checks are constant-time and cost the same for unknown users". What a check
 * costs is its scrypt: node:crypto's `scrypt` is watched (the real one still runs), and a sign-in
 * as a User that does not exist must derive exactly as one with a wrong password for a User whose
 * hash has today's parameters: one derivation, the same N, r, p, salt and key length (an unknown user's password is not
 * derived at all: the dummy derivation takes an empty one, and scrypt's cost is its N, r and p).
 */

vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:crypto')>();
  return { ...actual, scrypt: vi.fn(actual.scrypt) };
});

const scryptCalls = () =>
  vi.mocked(crypto.scrypt).mock.calls.map(([, salt, keylen, options]) => ({
    saltLength: (salt as Buffer).length,
    keylen,
    options,
  }));

const NAMESPACE = 'platform-system';

/** An apiserver that holds the User `alice` and her password Secret (a hash with today's parameters), and nothing else. */
function apiserver(hash: string): KubeApi {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const objects: Record<string, unknown> = {
    '/apis/management.platform/v1/users/alice': {
      metadata: { name: 'alice', uid: 'u1' },
      spec: { username: 'alice' },
    },
    [`/api/v1/namespaces/${NAMESPACE}/secrets/platform-password-alice`]: {
      metadata: { name: 'platform-password-alice' },
      data: { user: b64('alice'), uid: b64('u1'), hash: b64(hash) },
    },
  };
  return {
    request: async <T>(options: RequestOptions) => {
      const found = objects[options.path];
      if (found === undefined) throw new ApiException(404, 'NotFound', {}, {});
      return found as T;
    },
    watch: () => Promise.reject(new Error('no watches here')),
  };
}

describe('the scrypt of a password sign-in', () => {
  let hash = '';
  beforeEach(async () => {
    hash ||= await hashPassword('the right password', crypto.randomBytes);
    vi.mocked(crypto.scrypt).mockClear();
  });

  async function signIn(username: string, password: string) {
    const service = new LoginService({
      api: apiserver(hash),
      platformNamespace: NAMESPACE,
      random: crypto.randomBytes,
      config: () => DEFAULT_PLATFORM_CONFIG,
      throttle: new LoginThrottle(crypto.randomBytes(32)),
    });
    vi.mocked(crypto.scrypt).mockClear();
    const refusal = await service.passwordLogin({ username, password, source: '192.0.2.1' }).then(
      () => undefined,
      (err: unknown) => err,
    );
    return { refusal, calls: scryptCalls() };
  }

  it('is the same for an unknown user as for a wrong password: one derivation with today’s parameters', async () => {
    const wrong = await signIn('alice', 'a wrong password');
    const unknown = await signIn('bob', 'a wrong password');
    expect(wrong.refusal).toBeInstanceOf(InvalidCredentials);
    expect(unknown.refusal).toBeInstanceOf(InvalidCredentials);
    const N = 2 ** PASSWORD_HASH_PARAMS.logN;
    expect(wrong.calls).toEqual([
      {
        saltLength: 16,
        keylen: 32,
        options: expect.objectContaining({ N, r: PASSWORD_HASH_PARAMS.r, p: PASSWORD_HASH_PARAMS.p }),
      },
    ]);
    expect(unknown.calls).toEqual(wrong.calls);
  }, 60_000);
});

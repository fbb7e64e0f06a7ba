import { randomBytes } from 'node:crypto';
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PLATFORM_CONFIG } from '../config/platform-config.ts';
import type { KubeApi, RequestOptions } from '../runtime/kube-api.ts';
import { hashPassword } from './password.ts';
import { InvalidCredentials, LoginService } from './service.ts';
import { LoginThrottle } from './throttle.ts';

/**
 * docs/login.md and docs/security.md: a password sign-in for an unknown user costs the same
 * reads as a wrong password (the User, then a password Secret), and both are refused alike, so
 * neither the answer nor the apiserver traffic tells who exists. (The scrypt: `verifyPassword`
 * derives once whatever it is given, a missing hash against a dummy one; `password.test.ts`.)
 */

const NAMESPACE = 'platform-system';
/** Cheap scrypt parameters for the stored hash (the refusals below check against today's dummy). */
const FAST = { logN: 10, r: 8, p: 1 };
const storedHash = hashPassword('the right password', randomBytes, FAST);

/** An apiserver holding one User `alice` (uid `u1`), with or without a password Secret. */
async function apiserver(options: { password: boolean }): Promise<{ api: KubeApi; reads: string[] }> {
  const reads: string[] = [];
  const hash = await storedHash;
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const objects: Record<string, unknown> = {
    '/apis/management.platform/v1/users/alice': {
      metadata: { name: 'alice', uid: 'u1' },
      spec: { username: 'alice' },
    },
    ...(options.password
      ? {
          [`/api/v1/namespaces/${NAMESPACE}/secrets/platform-password-alice`]: {
            metadata: { name: 'platform-password-alice' },
            data: { user: b64('alice'), uid: b64('u1'), hash: b64(hash) },
          },
        }
      : {}),
  };
  const api: KubeApi = {
    request: async <T>(options: RequestOptions) => {
      if (options.method !== 'GET') throw new Error(`unexpected ${options.method} ${options.path}`);
      reads.push(options.path.replaceAll(/alice|bob/g, '<user>'));
      const found = objects[options.path];
      if (found === undefined) throw new ApiException(404, 'NotFound', {}, {});
      return found as T;
    },
    watch: () => Promise.reject(new Error('no watches here')),
  };
  return { api, reads };
}

async function attempt(options: { password: boolean }, username: string, password: string) {
  const { api, reads } = await apiserver(options);
  const service = new LoginService({
    api,
    platformNamespace: NAMESPACE,
    random: randomBytes,
    config: () => DEFAULT_PLATFORM_CONFIG,
    throttle: new LoginThrottle(randomBytes(32)),
  });
  const refusal = await service.passwordLogin({ username, password, source: '192.0.2.1' }).then(
    () => undefined,
    (err: unknown) => err,
  );
  return { refusal, reads };
}

describe('a password sign-in that fails', () => {
  it('reads the same for an unknown user, a user without a password and a wrong password, and is refused alike', async () => {
    const wrong = await attempt({ password: true }, 'alice', 'a wrong password');
    const unknown = await attempt({ password: true }, 'bob', 'a wrong password');
    const noPassword = await attempt({ password: false }, 'alice', 'a wrong password');
    expect(wrong.reads).toEqual([
      '/apis/management.platform/v1/users/<user>',
      `/api/v1/namespaces/${NAMESPACE}/secrets/platform-password-<user>`,
    ]);
    for (const other of [unknown, noPassword]) {
      expect(other.reads).toEqual(wrong.reads);
      expect(other.refusal).toBeInstanceOf(InvalidCredentials);
      expect((other.refusal as Error).message).toBe((wrong.refusal as Error).message);
    }
    expect(wrong.refusal).toBeInstanceOf(InvalidCredentials);
  }, 60_000);
});

import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { KubeApi, RequestOptions } from '../runtime/kube-api.ts';
import {
  InvalidPepperSecret,
  PEPPER_SECRET_KEY,
  PepperStore,
  pepperFromSecret,
  pepperSecret,
} from './pepper.ts';

/** Records requests; answers GETs from `stored` (404 when absent), POSTs as `onCreate` says. */
function recordingApi(
  stored: { data?: Record<string, string> } | undefined,
  onCreate: 'ok' | 'conflict' = 'ok',
) {
  const requests: RequestOptions[] = [];
  let current = stored;
  const api: KubeApi = {
    request: async <T>(options: RequestOptions) => {
      requests.push(options);
      if (options.method === 'GET') {
        if (!current) throw new ApiException(404, 'NotFound', {}, {});
        return current as T;
      }
      if (onCreate === 'conflict') {
        current = pepperSecret('platform', () => new Uint8Array(32).fill(9));
        throw new ApiException(409, 'AlreadyExists', { reason: 'AlreadyExists' }, {});
      }
      current = options.body as typeof current;
      return current as T;
    },
    watch: async () => {
      throw new Error('not used');
    },
  };
  return { api, requests };
}

describe('pepper', () => {
  it('load never writes; ensure creates an immutable Secret once and reads it back', async () => {
    const { api, requests } = recordingApi(undefined);
    const store = new PepperStore(api, 'platform', (n) => new Uint8Array(n).fill(1));
    expect(await store.load()).toBeUndefined();
    expect(requests.every((r) => r.method === 'GET')).toBe(true);
    const pepper = await store.ensure();
    expect(pepper).toEqual(new Uint8Array(32).fill(1));
    const created = requests.find((r) => r.method === 'POST')?.body as { immutable: boolean };
    expect(created.immutable).toBe(true);
  });

  it('adopts the pepper of a replica that won the creation race', async () => {
    const { api } = recordingApi(undefined, 'conflict');
    const store = new PepperStore(api, 'platform', (n) => new Uint8Array(n).fill(1));
    expect(await store.ensure()).toEqual(new Uint8Array(32).fill(9));
  });

  it('refuses a short pepper without showing it', () => {
    const secret = { data: { [PEPPER_SECRET_KEY]: Buffer.from('short-secret').toString('base64') } };
    expect(() => pepperFromSecret(secret, 'platform')).toThrow(InvalidPepperSecret);
    try {
      pepperFromSecret(secret, 'platform');
    } catch (err) {
      expect(String(err)).not.toContain('short-secret');
    }
  });
});

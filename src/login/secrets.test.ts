import { describe, expect, it } from 'vitest';
import { loginSecrets, SealBroken, seal, unseal } from './secrets.ts';

const pepper = new Uint8Array(32).fill(9);

describe('sealed login state', () => {
  it('opens what it sealed until it expires', async () => {
    const { transactionKey } = loginSecrets(pepper);
    const token = await seal({ state: 's', nonce: 'n' }, transactionKey, 2000);
    expect(token).not.toContain('nonce');
    expect(await unseal(token, transactionKey, 1000)).toEqual({ state: 's', nonce: 'n' });
    await expect(unseal(token, transactionKey, 2000)).rejects.toBeInstanceOf(SealBroken);
  });

  it('refuses tampered values, other keys and garbage', async () => {
    const { transactionKey, deviceKey } = loginSecrets(pepper);
    expect(Buffer.from(transactionKey).equals(Buffer.from(deviceKey))).toBe(false);
    const token = await seal({ a: 1 }, transactionKey, 2000);
    const parts = token.split('.');
    parts[3] = `${parts[3]?.slice(0, -2)}AA`;
    for (const bad of [parts.join('.'), 'x', '', undefined]) {
      await expect(unseal(bad, transactionKey, 0)).rejects.toBeInstanceOf(SealBroken);
    }
    await expect(unseal(token, deviceKey, 0)).rejects.toBeInstanceOf(SealBroken);
  });
});

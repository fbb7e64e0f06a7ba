import { describe, expect, test } from 'vitest';
import { configOfSecret } from './platform-config.ts';

describe('configOfSecret', () => {
  const secret = (config: string) => ({ data: { config: Buffer.from(config).toString('base64') } });
  test('reads the configuration with defaults filled in', () => {
    const config = configOfSecret(secret('auth:\n  accessKeyMaxTTLSeconds: 30\n'));
    expect(config.auth.accessKeyMaxTTLSeconds).toBe(30);
    expect(config.auth.loginAccessKeyTTLSeconds).toBe(1_728_000);
  });
  test('no Secret, or an invalid one, means the defaults', () => {
    const defaults = configOfSecret(undefined);
    expect(defaults.projectNamespacePrefix).toBe('p-');
    expect(configOfSecret(secret('auth: [not, a, mapping]\n'))).toEqual(defaults);
    expect(configOfSecret(secret('projectNamespacePrefix: team-\n')).projectNamespacePrefix).toBe('team-');
  });
});

import { describe, expect, test } from 'vitest';
import { DEFAULT_PLATFORM_CONFIG, PlatformConfigReader } from './platform-config.ts';

const secret = (config: string, resourceVersion: string) => ({
  metadata: { resourceVersion },
  data: { config: Buffer.from(config).toString('base64') },
});

describe('PlatformConfigReader: one rule for an invalid configuration', () => {
  test('reads the configuration with defaults filled in; no Secret means the defaults', () => {
    const reader = new PlatformConfigReader();
    expect(reader.of(undefined)).toEqual(DEFAULT_PLATFORM_CONFIG);
    const config = reader.of(secret('auth:\n  accessKeyMaxTTLSeconds: 30\n', '1'));
    expect(config.auth.accessKeyMaxTTLSeconds).toBe(30);
    expect(config.auth.loginAccessKeyTTLSeconds).toBe(1_728_000);
  });

  test('an invalid configuration is never applied: the last valid one stays, reported once', () => {
    const invalid: number[] = [];
    const reader = new PlatformConfigReader({ onInvalid: (issues) => invalid.push(issues) });
    const valid = reader.of(secret('projectNamespacePrefix: team-\n', '1'));
    expect(valid.projectNamespacePrefix).toBe('team-');
    const broken = secret('auth: [not, a, mapping]\n', '2');
    expect(reader.of(broken)).toBe(valid);
    expect(reader.of(broken)).toBe(valid);
    expect(invalid).toEqual([1]);
    expect(reader.stored()).toMatchObject({ resourceVersion: '2', raw: 'auth: [not, a, mapping]\n' });
    expect(reader.stored().error?.issues.length).toBe(1);
    expect(reader.of(secret('projectNamespacePrefix: x-\n', '3')).projectNamespacePrefix).toBe('x-');
  });

  test('an invalid configuration before any valid one means the defaults', () => {
    const reader = new PlatformConfigReader();
    expect(reader.of(secret('- a list\n', '1'))).toEqual(DEFAULT_PLATFORM_CONFIG);
  });

  test('parsed once per resourceVersion', () => {
    const reader = new PlatformConfigReader();
    const first = reader.of(secret('projectNamespacePrefix: a-\n', '7'));
    expect(reader.of(secret('projectNamespacePrefix: a-\n', '7'))).toBe(first);
  });
});

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { uniqueName } from '../support/cluster.ts';
import { kubectlOn, useWebhookEnv } from './support.ts';

const env = useWebhookEnv();

/**
 * The spec's deprecated OwnedAccessKey fields `parent` and `oidcLogin` have no effect here; a
 * `kubectl apply` of a key carrying them is admitted and prints one warning per field, naming
 * it and never its value (`src/api/deprecated-fields.ts`).
 */
describe('deprecated fields', () => {
  it('kubectl apply of an OwnedAccessKey with spec.parent and spec.oidcLogin prints a warning for each', async () => {
    const e = env();
    const name = uniqueName('dep');
    const key = (description: string) =>
      JSON.stringify({
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'OwnedAccessKey',
        metadata: { name },
        spec: {
          user: 'alice',
          description,
          key: generateAccessKey(randomBytes).key,
          parent: 'parent-value-not-echoed',
          oidcLogin: { idToken: 'id-token-not-echoed', refreshToken: 'refresh-token-not-echoed' },
        },
      });
    const created = await kubectlOn(e, ['apply', '-f', '-'], key('first'));
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain('created');
    const warnings = created.stderr.split('\n').filter((line) => line.startsWith('Warning: '));
    expect(warnings.map((line) => line.slice('Warning: '.length, line.indexOf(':', 9)))).toEqual([
      'spec.parent',
      'spec.oidcLogin',
    ]);
    expect(warnings.join('\n')).toContain('has no effect in this platform');
    for (const value of ['parent-value-not-echoed', 'id-token-not-echoed', 'refresh-token-not-echoed'])
      expect(created.stderr).not.toContain(value);

    // An update still carrying them warns again, as kube-apiserver does for its own deprecated fields.
    const updated = await kubectlOn(e, [
      'patch',
      'ownedaccesskey',
      name,
      '--type=merge',
      '-p',
      '{"spec":{"description":"second"}}',
    ]);
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stderr).toContain('Warning: spec.parent: deprecated');
    expect(updated.stderr).toContain('Warning: spec.oidcLogin: deprecated');
  });

  it('metadata.selfLink (deprecated for every kind) is neither stored nor returned: kube-apiserver drops it', async () => {
    const e = env();
    const name = uniqueName('self');
    const body = {
      apiVersion: `${API_GROUP}/${API_VERSION}`,
      kind: 'OwnedAccessKey',
      metadata: { name, selfLink: `/apis/${API_GROUP}/${API_VERSION}/ownedaccesskeys/elsewhere` },
      spec: { user: 'alice', key: generateAccessKey(randomBytes).key },
    };
    const created = (await e.custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'ownedaccesskeys',
      body,
    })) as { metadata: Record<string, unknown> };
    expect(created.metadata.name).toBe(name);
    expect(created.metadata.selfLink).toBeUndefined();
    const read = (await e.custom.getClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'ownedaccesskeys',
      name,
    })) as { metadata: Record<string, unknown> };
    expect(read.metadata.selfLink).toBeUndefined();
  });

  it('a key without them applies without a warning', async () => {
    const e = env();
    const body = JSON.stringify({
      apiVersion: `${API_GROUP}/${API_VERSION}`,
      kind: 'OwnedAccessKey',
      metadata: { name: uniqueName('plain') },
      spec: { user: 'alice', key: generateAccessKey(randomBytes).key, identity: { username: 'alice' } },
    });
    const run = await kubectlOn(e, ['apply', '-f', '-'], body);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toContain('Warning:');
  });
});

import { expect } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { parseAccessKey } from '../../src/identity/keys.ts';
import { useGatewayEnv } from '../gateway/support.ts';
import { runDocExamples } from './runner.ts';
import { expectShellVar, gatewayVars, useTempDir } from './support.ts';

/**
 * docs/access-keys-ci.md against a kube-apiserver of its own with the CRDs, the admission
 * webhooks, the SharedSecret, access key and project controllers and an HTTPS gateway: the
 * bootstrap key made by the page's script and `kubectl create`, keys created, listed, disabled
 * and rotated with curl, a CI job's requests with curl and with kubectl through the gateway, and
 * the keys of virtual cluster kubeconfigs (a day by default, cut to the caller key's life).
 * kube-controller-manager aggregates the chart's project roles, so the project's owner may
 * retrieve kubeconfigs as in an installation.
 */
const env = useGatewayEnv({
  https: true,
  controllers: ['sharedsecret', 'accesskey', 'project'],
  controllerManager: true,
});
const dir = useTempDir('doc-access-keys-');
const KEY = /^pak_[a-z2-7]{16}_[0-9A-Za-z]{49}$/;

const storedKey = async (name: string) =>
  (await env().custom.getClusterCustomObject({
    group: API_GROUP,
    version: API_VERSION,
    plural: 'ownedaccesskeys',
    name,
  })) as { spec: Record<string, unknown> };

runDocExamples('access-keys-ci.md', {
  env: () => gatewayVars(env(), dir),
  hooks: {
    'bootstrap-admin': {
      after: async (_result, ctx) => {
        const key = await ctx.shellVar('PLATFORM_ADMIN_KEY');
        // The script makes well-formed keys, and only their hash is stored.
        expect(key).toMatch(KEY);
        expect(parseAccessKey(key!)).toMatchObject({ id: key!.split('_')[1] });
        const stored = await storedKey('admin-bootstrap');
        expect(stored.spec.key).toBeUndefined();
        expect(stored.spec.keyHash).toMatch(/^[a-f0-9]{64}$/);
        expect(JSON.stringify(stored)).not.toContain(key!.slice(21));
      },
    },
    'key-for-alice': { after: expectShellVar('PLATFORM_ACCESS_KEY', KEY) },
    'create-ci-key': {
      after: async (result, ctx) => {
        await expectShellVar('CI_ACCESS_KEY', KEY)(result, ctx);
        const name = (await ctx.shellVar('CI_KEY_NAME'))!;
        const stored = await storedKey(name);
        expect(stored.spec).toMatchObject({ user: 'alice', ttl: 2592000, type: 'User' });
        expect(stored.spec.scope).toEqual({
          roles: [{ role: 'platform-cli' }],
          projects: [{ project: 'web' }],
        });
      },
    },
    'kubeconfig-default': {
      after: async (result) => {
        // Token mode: the virtual cluster's path on the gateway's access proxy.
        expect(result.values.PLATFORM_URL).toBe(env().server.url);
        const keys = (await env().custom.listClusterCustomObject({
          group: API_GROUP,
          version: API_VERSION,
          plural: 'ownedaccesskeys',
        })) as { items: { metadata: { name: string }; spec: Record<string, unknown> }[] };
        const issued = keys.items.filter((key) => key.metadata.name.startsWith('kubeconfig-'));
        expect(issued.map((key) => key.spec)).toEqual([
          expect.objectContaining({ user: 'alice', type: 'Other', ttl: 86400 }),
        ]);
      },
    },
    'kubeconfig-capped': {
      after: (result) => {
        const ttl = Number(result.values.CAPPED_TTL);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(3600);
      },
    },
    'rotate-key': {
      after: async (result, ctx) => {
        // The old key is gone: the name printed is the one deleted, the new one is in use.
        const old = `ci-deploy-web-${result.values.OLD_SUFFIX}`;
        await expect(storedKey(old)).rejects.toThrow();
        expect(await ctx.shellVar('CI_KEY_NAME')).not.toBe(old);
      },
    },
  },
});

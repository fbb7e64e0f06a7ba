import { createHash } from 'node:crypto';
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { Team, User } from '../api/identity.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import type { AuthenticationContext } from '../identity/authenticate.ts';
import { generateAccessKey, type RandomBytes, verifyAccessKey } from '../identity/keys.ts';
import {
  ADMIN_USER_NAME,
  adminKubeconfig,
  adminUserObject,
  adminUserRepair,
  bootstrapKeyName,
  bootstrapKeyObject,
  platformAdminsBinding,
  tokenOfKubeconfig,
} from './admin-objects.ts';
import { retryWhileUnavailable } from './bootstrap.ts';
import { storedKeyVerdict } from './stored-admin-key.ts';

/** Deterministic bytes: SHA-256 of a counter, so every test sees the same keys. */
function seededRandom(seed: string): RandomBytes {
  let counter = 0;
  return (size) => {
    const out = Buffer.alloc(size);
    for (let offset = 0; offset < size; offset += 32) {
      createHash('sha256').update(`${seed}:${counter++}`).digest().copy(out, offset);
    }
    return out;
  };
}

const pepper = new Uint8Array(seededRandom('pepper')(32));
const now = new Date('2030-01-01T00:00:00Z');
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const SERVER = 'https://127.0.0.1:40443/kubernetes/management';

type Stored<T> = T & { metadata: { creationTimestamp?: string } };

function world(
  overrides: {
    key?: (key: Stored<OwnedAccessKey>) => Stored<OwnedAccessKey> | undefined;
    user?: (user: User) => User | undefined;
    teams?: Team[];
    limits?: AuthenticationContext['limits'];
    pepper?: Uint8Array;
  } = {},
) {
  const generated = generateAccessKey(seededRandom('key'));
  const stored = {
    ...bootstrapKeyObject(generated, pepper),
    metadata: {
      ...bootstrapKeyObject(generated, pepper).metadata,
      creationTimestamp: new Date(now.getTime() - 3600_000).toISOString(),
    },
  } as Stored<OwnedAccessKey>;
  const key = overrides.key ? overrides.key(stored) : stored;
  const baseUser = adminUserObject() as User;
  const user = overrides.user ? overrides.user(baseUser) : baseUser;
  const context: AuthenticationContext = {
    lookupKey: (id) => (key?.spec.keyId === id ? [key] : []),
    lookupUser: (name) => (name === ADMIN_USER_NAME ? user : undefined),
    lookupTeam: (name) => overrides.teams?.find((team) => team.metadata.name === name),
    pepper: overrides.pepper ?? pepper,
    now: () => now,
    limits: overrides.limits ?? {},
  };
  return { accessKey: generated.key, context };
}

describe('storedKeyVerdict: keep the key of admin.kubeconfig only while the gateway would accept it as an admin', () => {
  test('nothing stored yet: mint', () => {
    const { context } = world();
    expect(storedKeyVerdict(undefined, context)).toEqual({
      keep: false,
      reason: 'no admin key is stored yet',
    });
  });

  test('a valid key of the admin user: keep', () => {
    const { accessKey, context } = world();
    expect(storedKeyVerdict(accessKey, context)).toEqual({ keep: true });
  });

  test('refused keys: mint, with the reason and never the key', () => {
    const cases: [string, ReturnType<typeof world>, RegExp][] = [
      ['object deleted', world({ key: () => undefined }), /not found or invalid/],
      ['hash under another pepper', world({ pepper: new Uint8Array(32).fill(7) }), /not found or invalid/],
      ['disabled', world({ key: (k) => ({ ...k, spec: { ...k.spec, disabled: true } }) }), /disabled/],
      [
        'being deleted',
        world({ key: (k) => ({ ...k, metadata: { ...k.metadata, deletionTimestamp: now.toISOString() } }) }),
        /disabled/,
      ],
      ['ttl over', world({ key: (k) => ({ ...k, spec: { ...k.spec, ttl: 60 } }) }), /expired/],
      ['global maximum over', world({ limits: { accessKeyMaxTTLSeconds: 600 } }), /expired/],
      ['user deleted', world({ user: () => undefined }), /user does not exist/],
      [
        'user disabled',
        world({ user: (u) => ({ ...u, spec: { ...u.spec, disabled: true } }) }),
        /user is disabled/,
      ],
    ];
    for (const [what, { accessKey, context }, reason] of cases) {
      const verdict = storedKeyVerdict(accessKey, context);
      expect(verdict.keep, what).toBe(false);
      if (!verdict.keep) {
        expect(verdict.reason, what).toMatch(reason);
        expect(verdict.reason, what).not.toContain(accessKey);
      }
    }
    const { context } = world();
    expect(storedKeyVerdict('pak_not-a-key', context)).toMatchObject({ keep: false });
  });

  test('a user who is no platform admin (any more): mint; admin through a team: keep', () => {
    const notAdmin = world({ user: (u) => ({ ...u, spec: { ...u.spec, clusterRoles: [] } }) });
    expect(storedKeyVerdict(notAdmin.accessKey, notAdmin.context)).toEqual({
      keep: false,
      reason: 'the stored one does not act as a platform admin',
    });
    const viaTeam = world({
      user: (u) => ({ ...u, spec: { ...u.spec, clusterRoles: [] }, status: { teams: ['ops'] } }),
      teams: [
        {
          apiVersion: 'management.platform/v1',
          kind: 'Team',
          metadata: { name: 'ops' },
          spec: { clusterRoles: [{ name: 'platform-admin' }] },
        } as Team,
      ],
    });
    expect(storedKeyVerdict(viaTeam.accessKey, viaTeam.context)).toEqual({ keep: true });
  });
});

describe('bootstrapKeyObject', () => {
  test('stores the keyed hash and the public id, never the key; a user-managed key without expiry', () => {
    const generated = generateAccessKey(seededRandom('object'));
    const object = bootstrapKeyObject(generated, pepper);
    expect(JSON.stringify(object)).not.toContain(generated.secret);
    expect(object.spec).not.toHaveProperty('key');
    expect(object.spec).not.toHaveProperty('ttl');
    expect(object.metadata.name).toBe(bootstrapKeyName(generated.id));
    expect(object.spec).toMatchObject({ user: ADMIN_USER_NAME, type: 'User', keyId: generated.id });
    expect(verifyAccessKey(generated.key, object.spec.keyHash, pepper)).toBe(true);
  });
});

describe('admin.kubeconfig', () => {
  const accessKey = generateAccessKey(seededRandom('kubeconfig')).key;

  test('points at the gateway, trusts its CA, carries the key; the same inputs give the same text', () => {
    const text = adminKubeconfig({ server: SERVER, caPem: CA_PEM, accessKey });
    expect(adminKubeconfig({ server: SERVER, caPem: CA_PEM, accessKey })).toBe(text);
    const document = parseYaml(text);
    const context = document.contexts.find((c: { name: string }) => c.name === document['current-context']);
    const cluster = document.clusters.find((c: { name: string }) => c.name === context.context.cluster);
    expect(cluster.cluster.server).toBe(SERVER);
    expect(Buffer.from(cluster.cluster['certificate-authority-data'], 'base64').toString()).toBe(CA_PEM);
    expect(tokenOfKubeconfig(text)).toBe(accessKey);
  });

  test('tokenOfKubeconfig reads the current context only and never throws', () => {
    expect(tokenOfKubeconfig('')).toBeUndefined();
    expect(tokenOfKubeconfig(': not yaml : [')).toBeUndefined();
    expect(tokenOfKubeconfig('- a list')).toBeUndefined();
    const text = adminKubeconfig({ server: SERVER, caPem: CA_PEM, accessKey });
    expect(tokenOfKubeconfig(text.replace('current-context: platform-dev', 'current-context: other'))).toBe(
      undefined,
    );
    expect(tokenOfKubeconfig(text.replace(`token: ${accessKey}`, 'client-certificate-data: eA=='))).toBe(
      undefined,
    );
  });
});

describe('the admin User and its RBAC', () => {
  test('the User is a platform admin', () => {
    expect(adminUserObject()).toMatchObject({
      kind: 'User',
      metadata: { name: 'admin' },
      spec: { clusterRoles: [{ name: 'platform-admin' }] },
    });
  });

  test('adminUserRepair restores the role and enables the user, keeping everything else', () => {
    expect(adminUserRepair(adminUserObject() as User)).toBeUndefined();
    const broken = {
      metadata: { resourceVersion: '42' },
      spec: { displayName: 'x', clusterRoles: [{ name: 'auditor' }], disabled: true },
    };
    expect(adminUserRepair(broken)).toEqual({
      patch: {
        metadata: { resourceVersion: '42' },
        spec: { clusterRoles: [{ name: 'auditor' }, { name: 'platform-admin' }], disabled: null },
      },
      fixes: ['gave it the cluster role platform-admin', 'enabled it'],
    });
  });

  test('platform admins are bound to cluster-admin', () => {
    expect(platformAdminsBinding()).toMatchObject({
      roleRef: { kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'Group', name: 'platform:admins' }],
    });
  });
});

describe('retryWhileUnavailable', () => {
  test('retries while the apiserver cannot answer, and gives a definite answer at once', async () => {
    let calls = 0;
    const flaky = async () => {
      calls++;
      if (calls < 2) throw new ApiException(500, 'failed calling webhook', {}, {});
      return 'done';
    };
    expect(await retryWhileUnavailable('creating', flaky, 10_000)).toBe('done');
    expect(calls).toBe(2);

    let forbidden = 0;
    const denied = async () => {
      forbidden++;
      throw new ApiException(403, 'Forbidden', {}, {});
    };
    await expect(retryWhileUnavailable('creating the User admin', denied, 10_000)).rejects.toThrow(
      /^creating the User admin: /,
    );
    expect(forbidden).toBe(1);
  });
});

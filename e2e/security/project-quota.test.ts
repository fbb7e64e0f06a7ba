// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { eventually } from '../support/wait.ts';
import { conditionOf, FINANCE, MALLORY, MP, TEAM, useTenantPlatform, V1 } from './support.ts';

const QUOTA = `/api/v1/namespaces/${TEAM}/resourcequotas/platform-project-quota`;
const INSTANCES = `${MP}/namespaces/${TEAM}/virtualclusterinstances`;
const COUNT = 'count/virtualclusterinstances.management.platform';
const TEMPLATE = 'small';

const provisioned = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: V1,
  kind: 'VirtualClusterInstance',
  metadata: { name },
  spec: { templateRef: { name: TEMPLATE }, ...spec },
});

/**
 * Issue 27: a project member gets virtual clusters by naming a template, within the project's
 * quota, and nothing else. Mallory (edit in `team`) and lead (its owner, admin there) against a
 * platform installed by the chart, on a host whose controller manager counts quota usage:
 *
 * - the quota holds under concurrent creates (the apiserver's quota admission, not a count of ours);
 * - neither can edit or delete the ResourceQuota that carries it;
 * - templates are the admins': members read them, never write them;
 * - an instance has no field of the template's to set: unknown fields are refused (strict field
 *   validation) or dropped, on the host and through the gateway's management API alike, and an
 *   invalid instance is refused with a Status naming the field;
 * - nobody provisions into another project's namespace.
 */
describe('security: project quotas and templates', () => {
  const env = useTenantPlatform({ gateway: true });

  /** Mallory's access key on the gateway's management API (`/kubernetes/management/apis/...`). */
  const gatewayAsMallory = async () => {
    const { admin, gatewayUrl } = env();
    const own = generateAccessKey(randomBytes);
    await admin.create(`${MP}/ownedaccesskeys`, {
      apiVersion: V1,
      kind: 'OwnedAccessKey',
      metadata: { name: `mallory-quota-${randomBytes(3).toString('hex')}` },
      spec: { user: MALLORY, type: 'User', key: own.key },
    });
    const call = async (method: string, path: string, body?: unknown) => {
      const answer = await fetch(`${gatewayUrl}/kubernetes/management${path}`, {
        method,
        headers: { authorization: `Bearer ${own.key}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: answer.status, body: (await answer.json()) as any };
    };
    await eventually(
      async () => (await call('GET', INSTANCES)).status === 200,
      60_000,
      'the gateway to accept her key',
    );
    return call;
  };

  /**
   * The host's quota controller counts a custom resource only once its discovery resync (every
   * 30 s) has found the CRD; a quota created before that is counted at its next full resync (5
   * minutes). This host was started moments ago: wait until a scratch quota is counted, so the
   * project's quota, set after, is counted at once (its `QuotaEnforced` condition tells both cases).
   */
  const untilQuotaControllerCountsInstances = async () => {
    const { admin } = env();
    const namespace = 'quota-scratch';
    const scratch = `/api/v1/namespaces/${namespace}/resourcequotas`;
    await admin.create('/api/v1/namespaces', { metadata: { name: namespace } });
    await eventually(
      async () => {
        await admin.delete(`${scratch}/probe`);
        await eventually(
          async () => (await admin.get(`${scratch}/probe`)) === null,
          10_000,
          'the probe gone',
        );
        await admin.create(scratch, { metadata: { name: 'probe' }, spec: { hard: { [COUNT]: '1' } } });
        for (let i = 0; i < 20; i++) {
          if ((await admin.get(`${scratch}/probe`))?.status?.used?.[COUNT] !== undefined) return true;
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
        return false;
      },
      120_000,
      'the quota controller to count VirtualClusterInstances',
    );
    await admin.delete(`/api/v1/namespaces/${namespace}`);
  };

  test('templates: every member reads them, no member writes them', async () => {
    const { admin, mallory, lead } = env();
    await admin.create(`${MP}/virtualclustertemplates`, {
      apiVersion: V1,
      kind: 'VirtualClusterTemplate',
      metadata: { name: TEMPLATE },
      spec: { storage: { size: '1Gi', storageClassName: 'admins-choice' } },
    });
    for (const member of [mallory, lead]) {
      expect((await member.call('GET', `${MP}/virtualclustertemplates/${TEMPLATE}`)).status).toBe(200);
      expect((await member.call('GET', `${MP}/virtualclustertemplates`)).status).toBe(200);
      const created = await member.call('POST', `${MP}/virtualclustertemplates`, {
        body: {
          apiVersion: V1,
          kind: 'VirtualClusterTemplate',
          metadata: { name: 'mine' },
          spec: { storage: { size: '1Ti', storageClassName: 'hostpath' } },
        },
      });
      expect(created.status).toBe(403);
      const edited = await member.call('PATCH', `${MP}/virtualclustertemplates/${TEMPLATE}`, {
        body: { spec: { storage: { storageClassName: 'hostpath' } } },
        contentType: 'application/merge-patch+json',
      });
      expect(edited.status).toBe(403);
      expect((await member.call('DELETE', `${MP}/virtualclustertemplates/${TEMPLATE}`)).status).toBe(403);
    }
    expect((await admin.get(`${MP}/virtualclustertemplates/${TEMPLATE}`)).spec.storage).toEqual({
      size: '1Gi',
      storageClassName: 'admins-choice',
    });
  });

  test('an instance carries no template field, and an invalid one is refused naming the field, on the host and through the gateway', async () => {
    const { admin, mallory } = env();
    const gateway = await gatewayAsMallory();
    // The gateway serves templates as it serves every stored kind: hers to read, not to write.
    const read = await gateway('GET', `${MP}/virtualclustertemplates/${TEMPLATE}`);
    expect(read.status).toBe(200);
    expect(read.body.spec.storage.storageClassName).toBe('admins-choice');
    const written = await gateway('POST', `${MP}/virtualclustertemplates`, {
      apiVersion: V1,
      kind: 'VirtualClusterTemplate',
      metadata: { name: 'hers' },
      spec: { storage: { size: '1Ti', storageClassName: 'hostpath' } },
    });
    expect(written.status).toBe(403);
    const smuggled = {
      storageClassName: 'hostpath',
      hostPath: '/',
      privileged: true,
      storage: { size: '1Ti' },
      resources: { limits: { cpu: '64' } },
    };
    for (const [via, post] of [
      ['host', (query: string, body: unknown) => mallory.call('POST', `${INSTANCES}${query}`, { body })],
      ['gateway', (query: string, body: unknown) => gateway('POST', `${INSTANCES}${query}`, body)],
    ] as const) {
      const strict = await post('?fieldValidation=Strict', provisioned(`strict-${via}`, smuggled));
      expect(strict.status, via).toBe(400);
      for (const field of Object.keys(smuggled))
        expect(strict.body.message, via).toContain(`unknown field "spec.${field}"`);

      const invalid = await post(
        '',
        provisioned(`invalid-${via}`, { credentialsSecretRef: { name: 'vc-creds' } }),
      );
      expect(invalid.status, via).toBe(422);
      expect(invalid.body.kind, via).toBe('Status');
      expect(
        invalid.body.details.causes.map((c: any) => c.field),
        via,
      ).toContain('spec.credentialsSecretRef');

      const name = `pruned-${via}`;
      expect((await post('', provisioned(name, smuggled))).status, via).toBe(201);
      expect((await admin.get(`${INSTANCES}/${name}`)).spec, via).toEqual({
        templateRef: { name: TEMPLATE },
      });
      await admin.delete(`${INSTANCES}/${name}`);
    }
    // Not in another project's namespace either.
    const elsewhere = await mallory.call('POST', `${MP}/namespaces/${FINANCE}/virtualclusterinstances`, {
      body: provisioned('intruder'),
    });
    expect(elsewhere.status).toBe(403);
  });

  test('the quota holds under concurrent creates: N+5 at once leave exactly N', async () => {
    const { admin, mallory } = env();
    await untilQuotaControllerCountsInstances();
    const existing = (await admin.list(INSTANCES)).length;
    const N = 3;
    await admin.merge(`${MP}/projects/team`, { spec: { quotas: { virtualClusterInstances: existing + N } } });
    // The apiserver admits what the quota covers once the quota controller has counted usage.
    let quota: any;
    await eventually(
      async () => {
        quota = await admin.get(QUOTA);
        return (
          quota?.status?.hard?.[COUNT] === String(existing + N) &&
          quota.status.used?.[COUNT] === String(existing)
        );
      },
      60_000,
      'the ResourceQuota counted',
    ).catch((err: Error) => {
      throw new Error(
        `${err.message}; last: ${JSON.stringify({ spec: quota?.spec, status: quota?.status })}`,
      );
    });
    await eventually(
      async () => conditionOf(await admin.get(`${MP}/projects/team`), 'QuotaEnforced')?.status === 'True',
      30_000,
      'the project to report its quota enforced',
    );
    expect(conditionOf(await admin.get(`${MP}/projects/team`), 'QuotaEnforced')).toMatchObject({
      reason: 'Enforced',
      message: `at most ${existing + N} VirtualClusterInstances in namespace ${TEAM} (ResourceQuota platform-project-quota)`,
    });

    const answers = await Promise.all(
      Array.from({ length: N + 5 }, (_, i) =>
        mallory.call('POST', INSTANCES, { body: provisioned(`burst-${i}`) }),
      ),
    );
    const created = answers.filter((a) => a.status === 201);
    const refused = answers.filter((a) => a.status !== 201);
    expect(created).toHaveLength(N);
    expect(refused).toHaveLength(5);
    for (const answer of refused) {
      expect(answer.status).toBe(403);
      expect(answer.body).toMatchObject({ kind: 'Status', reason: 'Forbidden' });
      expect(answer.body.message).toContain('exceeded quota: platform-project-quota');
    }
    expect(await admin.list(INSTANCES)).toHaveLength(existing + N);
  });

  test('members can neither lift nor remove the quota', async () => {
    const { admin, mallory, lead } = env();
    const limit = (await admin.get(QUOTA)).spec.hard[COUNT];
    for (const [who, member] of [
      ['mallory', mallory],
      ['lead', lead],
    ] as const) {
      const patched = await member.call('PATCH', QUOTA, {
        body: { spec: { hard: { [COUNT]: '1000' } } },
        contentType: 'application/merge-patch+json',
      });
      expect(patched.status, who).toBe(403);
      expect((await member.call('DELETE', QUOTA)).status, who).toBe(403);
      const replaced = await member.call('PUT', QUOTA, { body: await admin.get(QUOTA) });
      expect(replaced.status, who).toBe(403);
    }
    expect((await admin.get(QUOTA)).spec.hard[COUNT]).toBe(limit);
    // Nor can the project's members change the Project itself (where the quota is set).
    const raised = await mallory.call('PATCH', `${MP}/projects/team`, {
      body: { spec: { quotas: { virtualClusterInstances: 1000 } } },
      contentType: 'application/merge-patch+json',
    });
    expect(raised.status).toBe(403);
  });

  test('unsetting the quota removes the ResourceQuota and its condition', async () => {
    const { admin } = env();
    await admin.jsonPatch(`${MP}/projects/team`, [{ op: 'remove', path: '/spec/quotas' }]);
    await eventually(async () => (await admin.get(QUOTA)) === null, 60_000, 'the ResourceQuota deleted');
    await eventually(
      async () => conditionOf(await admin.get(`${MP}/projects/team`), 'QuotaEnforced') === undefined,
      60_000,
      'the QuotaEnforced condition removed',
    );
  });
});

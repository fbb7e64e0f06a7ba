import { ApiException, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION, GROUP_VERSION } from '../../src/api/meta.ts';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually } from '../support/wait.ts';

const NAMESPACE = 'team';
const PLATFORM_NAMESPACE = 'platform-system';
const REGISTERED = { endpoint: 'https://dev.example.com', credentialsSecretRef: { name: 'dev-credentials' } };
const PROVISIONED = { templateRef: { name: 'small' }, sleepAfter: 600, deleteAfter: 0 };

type Instance = {
  metadata: { name: string; resourceVersion?: string };
  spec: Record<string, unknown>;
  status?: { conditions?: { type: string; status: string; reason?: string }[] };
};

/**
 * What a VirtualClusterInstance may ask for, decided by its CRD on a real apiserver (schema and
 * CEL rules, no webhook): exactly one of a registered endpoint and a template, credentials only
 * for a registered one, a template never changed nor set later, no field the schema does not
 * know (refused under strict field validation, dropped otherwise). And the virtual cluster
 * controller, which has no provisioner yet, reports a provisioned instance as such, not as a
 * registered one missing its credentials.
 */
describe('VirtualClusterInstance: registered or provisioned', () => {
  const startCluster = useExtraClusters();
  let cluster: Cluster;
  let kc: KubeConfig;
  let operator: Manager | undefined;
  beforeAll(async () => {
    cluster = await startCluster({ name: uniqueName('vci-spec') });
    kc = kubeConfigFor(cluster);
    await installCrds(kc);
    const core = kc.makeApiClient(CoreV1Api);
    for (const name of [NAMESPACE, PLATFORM_NAMESPACE])
      await core.createNamespace({ body: { metadata: { name } } });
  });
  afterAll(async () => {
    await operator?.stop();
  });

  const custom = () => kc.makeApiClient(CustomObjectsApi);
  const at = {
    group: API_GROUP,
    version: API_VERSION,
    namespace: NAMESPACE,
    plural: 'virtualclusterinstances',
  };
  const create = (name: string, spec: unknown, fieldValidation?: string) =>
    custom().createNamespacedCustomObject({
      ...at,
      body: { apiVersion: GROUP_VERSION, kind: 'VirtualClusterInstance', metadata: { name }, spec },
      ...(fieldValidation ? { fieldValidation } : {}),
    }) as Promise<Instance>;
  const replace = (instance: Instance) =>
    custom().replaceNamespacedCustomObject({
      ...at,
      name: instance.metadata.name,
      body: instance,
    }) as Promise<Instance>;
  const get = (name: string) => custom().getNamespacedCustomObject({ ...at, name }) as Promise<Instance>;

  /** The apiserver's refusal: its code, message and the fields its causes name. */
  async function refusal(attempt: Promise<unknown>) {
    try {
      await attempt;
    } catch (err) {
      if (!(err instanceof ApiException)) throw err;
      const status = JSON.parse(String(err.body)) as {
        kind: string;
        message: string;
        details?: { causes?: { field?: string; message?: string }[] };
      };
      return {
        code: err.code,
        kind: status.kind,
        message: status.message,
        fields: (status.details?.causes ?? []).map((cause) => cause.field),
      };
    }
    throw new Error('the apiserver accepted an invalid instance');
  }

  test.each([
    ['neither an endpoint nor a template', {}, 'spec.templateRef', 'set exactly one of spec.endpoint'],
    [
      'both an endpoint and a template',
      { ...REGISTERED, ...PROVISIONED },
      'spec.templateRef',
      'set exactly one of',
    ],
    [
      'credentials for a provisioned instance',
      { ...PROVISIONED, credentialsSecretRef: { name: 'mine' } },
      'spec.credentialsSecretRef',
      'only for a registered virtual cluster',
    ],
    ['a template without a name', { templateRef: {} }, 'spec.templateRef.name', 'Required value'],
    [
      'a negative sleepAfter',
      { ...PROVISIONED, sleepAfter: -1 },
      'spec.sleepAfter',
      'greater than or equal to 0',
    ],
    ['a fractional deleteAfter', { ...PROVISIONED, deleteAfter: 1.5 }, 'spec.deleteAfter', 'integer'],
  ])('refuses %s with a Status naming the field', async (_what, spec, field, message) => {
    const refused = await refusal(create(uniqueName('bad'), spec));
    expect(refused).toMatchObject({ code: 422, kind: 'Status' });
    expect(refused.fields).toContain(field);
    expect(refused.message).toContain(message);
  });

  test('keeps the template of a provisioned instance and never gives one to a registered instance', async () => {
    const provisioned = await create(uniqueName('prov'), PROVISIONED);
    for (const templateRef of [{ name: 'large' }, undefined]) {
      const refused = await refusal(replace({ ...provisioned, spec: { ...provisioned.spec, templateRef } }));
      expect(refused.code, JSON.stringify(templateRef)).toBe(422);
      expect(refused.fields).toContain('spec.templateRef');
    }
    const registered = await create(uniqueName('reg'), REGISTERED);
    const { endpoint: _, credentialsSecretRef: __, ...rest } = registered.spec;
    const turned = await refusal(
      replace({ ...registered, spec: { ...rest, templateRef: { name: 'small' } } }),
    );
    expect(turned.fields).toContain('spec.templateRef');
    // What the rules leave free still changes.
    const slept = await replace({ ...provisioned, spec: { ...provisioned.spec, sleepAfter: 60 } });
    expect(slept.spec).toEqual({ ...PROVISIONED, sleepAfter: 60 });
  });

  test('has no room for what the template decides: unknown fields are refused or dropped', async () => {
    const smuggled = {
      ...PROVISIONED,
      storageClassName: 'fast',
      hostPath: '/var/lib',
      privileged: true,
      resources: { limits: { cpu: '64' } },
      storage: { size: '1Ti' },
    };
    const strict = await refusal(create(uniqueName('strict'), smuggled, 'Strict'));
    // Strict field validation (kubectl's default) answers 400 BadRequest naming each field.
    expect(strict.code).toBe(400);
    for (const field of ['storageClassName', 'hostPath', 'privileged', 'resources', 'storage'])
      expect(strict.message).toContain(`unknown field "spec.${field}"`);
    const name = uniqueName('pruned');
    await create(name, smuggled);
    expect((await get(name)).spec).toEqual(PROVISIONED);
  });

  test('the virtual cluster controller reports a provisioned instance as not provisioned, not as broken', async () => {
    operator = createOperator(
      defaultOperatorOptions({
        kubeconfig: cluster.kubeconfigPath,
        namespace: PLATFORM_NAMESPACE,
        controllers: ['virtualcluster'],
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'warn',
      }),
      pino({ level: 'silent' }),
    );
    await operator.start();
    const name = uniqueName('waiting');
    await create(name, { ...PROVISIONED, config: 'sync:\n  toHost:\n    services:\n      enabled: true\n' });
    const registered = uniqueName('no-creds');
    await create(registered, { endpoint: 'https://dev.example.com' });
    const condition = (instance: Instance, type: string) =>
      instance.status?.conditions?.find((c) => c.type === type);
    let instance: Instance | undefined;
    await eventually(
      async () => {
        instance = await get(name);
        return condition(instance, 'Provisioned') !== undefined;
      },
      30_000,
      'the Provisioned condition',
    );
    expect(condition(instance!, 'Provisioned')).toMatchObject({
      status: 'False',
      reason: 'ProvisionerNotConfigured',
    });
    expect(condition(instance!, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'ProvisionerNotConfigured',
    });
    expect(condition(instance!, 'Stalled')).toBeUndefined();
    expect(condition(instance!, 'Syncing')).toBeUndefined();
    // A registered instance without credentials is still reported as such, in the same run.
    await eventually(
      async () => condition(await get(registered), 'Ready')?.reason === 'CredentialsMissing',
      30_000,
      'the registered instance reported',
    );
    expect(condition(await get(registered), 'Provisioned')).toBeUndefined();
  });
});

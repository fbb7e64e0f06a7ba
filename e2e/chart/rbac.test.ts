import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { SYNCER_SERVICE_ACCOUNT_PREFIX } from '../../src/api/labels.ts';
import { CONTROLLER_NAMES } from '../../src/controllers/index.ts';
import { type Cluster, freePort } from '../../src/dev/controlplane.ts';
import { PEPPER_SECRET_NAME } from '../../src/identity/pepper.ts';
import { ManagedProcess } from '../../src/provision/child-processes.ts';
import { SERVING_SECRET_NAME } from '../../src/webhooks/certificates/stored.ts';
import {
  MUTATING_CONFIGURATION_NAME,
  VALIDATING_CONFIGURATION_NAME,
} from '../../src/webhooks/configurations.ts';
import { uniqueName, useExtraClusters } from '../support/cluster.ts';
import { find, HELM_INSTALL_TIMEOUT_MS, helmBinary, type Manifest } from '../support/helm.ts';
import { eventually } from '../support/wait.ts';
import { PROBE_OF_ENTRY, PROBES, type Probe, type ProbeContext, type Setting, ssPath, V1 } from './probes.ts';
import {
  AuditLog,
  accessAttributes,
  auditPolicy,
  describeEvent,
  Http,
  type PolicyRule,
  type RuleEntry,
  ruleEntries,
  rulesWithout,
} from './rbac-support.ts';
import {
  COMPONENTS,
  type Component,
  componentCredentials,
  installChartObjects,
  NAMESPACE,
  provisionerOptionsOf,
  type RunningComponents,
  serviceAccountOf,
  startComponents,
  userOf,
} from './support.ts';

const SA_GROUPS = ['system:serviceaccounts', `system:serviceaccounts:${NAMESPACE}`, 'system:authenticated'];
/** The owner of the syncer ClusterRoles' entries: the syncers' own ServiceAccounts. */
const SYNCER = 'syncer';
const isSyncer = (username: string) =>
  /^system:serviceaccount:[^:]+:[^:]+$/.test(username) &&
  username.split(':')[3]!.startsWith(SYNCER_SERVICE_ACCOUNT_PREFIX);
/** Whose denials an owner's entries are proven by. */
const usersOf = (owner: string) =>
  owner === SYNCER ? isSyncer : (username: string) => username === userOf(owner as Component);
/** A ServiceAccount the syncer roles are bound to, for asking RBAC whether it caught up (no syncer runs as it). */
const SYNCER_CHECK = { namespace: 'syncer-rbac-check', name: `${SYNCER_SERVICE_ACCOUNT_PREFIX}check` };
const LEASE = 'platform-operator';
const PROJECT_PREFIX = 'proj-';

/** How long a step may take when it must work (generous: a shared, busy machine). */
const PASS_TIMEOUT_MS = 60_000;
/** Without a rule: a step fails once it has not held for this long after a request was denied, */
const SETTLE_MS = 1_000;
/** or after this long in any case. */
const FAIL_TIMEOUT_MS = 20_000;

class StepFailed extends Error {
  override readonly name = 'StepFailed';
  constructor(
    readonly step: string,
    cause: unknown,
  ) {
    super(`${step}: ${cause instanceof Error ? cause.message : String(cause ?? 'did not hold')}`, { cause });
  }
}

/**
 * The chart's RBAC, installed in a control plane, with each component (controller, webhook,
 * gateway) running out of cluster as its own ServiceAccount of the chart (TokenRequest tokens:
 * the requests really are the ServiceAccounts', as in their pods), and the virtual clusters'
 * syncers as theirs. The apiserver's audit log shows every request of theirs that RBAC denied.
 *
 * 1. With the chart's rules, every feature works and no request is denied (sufficient).
 * 2. Without any one (verb, resource[, name]) entry of any component's rules, or of the syncer
 *    roles, a feature fails, after the apiserver denied that component's request that needed it
 *    (each entry necessary).
 * 3. Only the gateway may impersonate.
 */
describe("the chart's RBAC is what each component needs, no more", () => {
  const startCluster = useExtraClusters();
  let workDir: string;
  let host: Cluster;
  let virtual: Cluster;
  let admin: Http;
  let sa: Record<Component, Http>;
  let kubeconfigs: Record<Component, string>;
  let virtualAdmin: Http;
  let audit: AuditLog;
  let webhookPort: number;
  let rendered: Manifest[];
  /** The Roles and ClusterRoles bound to each component's ServiceAccount, and the syncer roles. */
  const roles = new Map<string, Manifest[]>();
  let setting: Setting;
  let runs = 0;
  let aggregation: ManagedProcess | undefined;

  beforeAll(async () => {
    await helmBinary();
    workDir = mkdtempSync(join(tmpdir(), 'platform-chart-rbac-'));
    const policy = join(workDir, 'audit-policy.json');
    writeFileSync(policy, auditPolicy());
    const auditLog = join(workDir, 'audit.log');
    host = await startCluster({
      name: uniqueName('chart-rbac'),
      extraApiServerArgs: [
        `--audit-policy-file=${policy}`,
        `--audit-log-path=${auditLog}`,
        '--audit-log-mode=blocking',
        // As on clusters that enforce it (OpenShift, ...): blockOwnerDeletion needs update on
        // the owner's finalizers.
        '--enable-admission-plugins=OwnerReferencesPermissionEnforcement',
      ],
    });
    // Of kube-controller-manager only what any cluster runs and these features rely on: the
    // cluster role aggregation (the project roles get their rules, as in any cluster; an empty
    // aggregated role could be bound without `bind`), the garbage collector (children go with
    // their owners) and the namespace controller (deleted namespaces go, with their Services).
    aggregation = await ManagedProcess.start({
      name: 'kube-controller-manager (clusterrole aggregation, garbage collector, namespaces)',
      command: inject('controlPlaneBinary'),
      args: [
        'kube-controller-manager',
        `--kubeconfig=${host.kubeconfigPath}`,
        '--controllers=clusterrole-aggregation-controller,garbage-collector-controller,namespace-controller',
        '--leader-elect=false',
        '--secure-port=0',
      ],
      logPath: join(workDir, 'aggregation.log'),
    });
    virtual = await startCluster({ name: uniqueName('chart-vc') });
    audit = new AuditLog(
      auditLog,
      (username) => COMPONENTS.some((c) => userOf(c) === username) || isSyncer(username),
    );
    admin = new Http(host.server, host.caPem, host.adminToken);
    virtualAdmin = new Http(virtual.server, virtual.caPem, virtual.adminToken);
    webhookPort = await freePort();

    const install = await installChartObjects(host, {
      webhookPort,
      values: { config: { values: { projectNamespacePrefix: PROJECT_PREFIX } } },
    });
    rendered = install.rendered;
    setting = {
      namespace: NAMESPACE,
      leaseName: LEASE,
      projectPrefix: PROJECT_PREFIX,
      webhookServingSecret: SERVING_SECRET_NAME,
      pepperSecret: PEPPER_SECRET_NAME,
      webhookConfigurations: {
        validating: VALIDATING_CONFIGURATION_NAME,
        mutating: MUTATING_CONFIGURATION_NAME,
      },
      users: { alice: 'alice', bob: 'bob' },
      team: 'devs',
      virtual: { server: virtual.server, caPem: virtual.caPem, token: virtual.adminToken },
    };
    // Identities the probes name, before admission is registered (it would need the operator).
    for (const name of ['alice', 'bob'])
      await admin.create('/apis/management.platform/v1/users', {
        apiVersion: V1,
        kind: 'User',
        metadata: { name },
        spec: {},
      });
    await admin.create('/apis/management.platform/v1/teams', {
      apiVersion: V1,
      kind: 'Team',
      metadata: { name: 'devs' },
      spec: { users: ['bob'] },
    });
    await install.registerWebhooks();

    for (const component of COMPONENTS)
      roles.set(component, boundRoles(rendered, serviceAccountOf(component)));
    ({ kubeconfigs, clients: sa } = await componentCredentials(admin, host, workDir));
    const syncerRoles = rendered.filter(
      (m) => m.kind === 'ClusterRole' && (m.metadata.name as string).startsWith('platform-vcluster-syncer-'),
    );
    roles.set(SYNCER, syncerRoles);
    await admin.create('/api/v1/namespaces', { metadata: { name: SYNCER_CHECK.namespace } });
    for (const role of syncerRoles)
      await admin.create(
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${SYNCER_CHECK.namespace}/rolebindings`,
        {
          metadata: { name: role.metadata.name },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name },
          subjects: [{ kind: 'ServiceAccount', ...SYNCER_CHECK }],
        },
      );
  }, HELM_INSTALL_TIMEOUT_MS);

  afterAll(async () => {
    await aggregation?.stop();
    admin?.close();
    for (const client of Object.values(sa ?? {})) client.close();
    virtualAdmin?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  const newContext = (): ProbeContext => {
    runs += 1;
    return {
      id: `r${runs}`,
      identity: `probe-${runs}`,
      admin,
      sa,
      virtual: virtualAdmin,
      setting,
      cleanup: [],
      state: {},
    };
  };

  /** The components a probe needs, each as its own ServiceAccount; the webhooks always. */
  const runPlatform = (needs: NonNullable<Probe['needs']>, identity: string): Promise<RunningComponents> =>
    startComponents({
      kubeconfigs,
      webhookPort,
      controllers: needs.controllers,
      leaderElect: needs.leaderElect ?? false,
      leaseName: LEASE,
      identity,
      gateway: needs.gateway ?? false,
      provisioner: provisionerOptionsOf(rendered),
    });

  /** Whether the apiserver calls the webhooks: a dry-run that only they refuse (422). */
  const webhooksServe = async () =>
    (
      await admin.call('POST', `${ssPath('default')}?dryRun=All`, {
        body: {
          apiVersion: V1,
          kind: 'SharedSecret',
          metadata: { name: 'probe' },
          spec: { access: [{ verbs: ['x'] }] },
        },
      })
    ).status === 422;

  /**
   * Runs steps. `mustFail`: a step fails once it has not held SETTLE_MS after the first denied
   * request since `mark` (or after FAIL_TIMEOUT_MS), and the failure is returned; otherwise a
   * failure throws.
   */
  const runSteps = async (
    steps: Array<{ what: string; run?: () => Promise<unknown>; until?: () => Promise<boolean> }>,
    mode: { mustFail: boolean; mark: number },
  ): Promise<void> => {
    let firstDenial: number | undefined;
    for (const step of steps) {
      if (step.run) {
        try {
          await step.run();
        } catch (err) {
          throw new StepFailed(step.what, err);
        }
      }
      if (!step.until) continue;
      const until = step.until;
      const deadline = Date.now() + (mode.mustFail ? FAIL_TIMEOUT_MS : PASS_TIMEOUT_MS);
      let lastError: unknown;
      for (;;) {
        try {
          if (await until()) break;
        } catch (err) {
          lastError = err;
        }
        if (mode.mustFail && firstDenial === undefined && audit.denialsSince(mode.mark).length > 0)
          firstDenial = Date.now();
        if (
          Date.now() > deadline ||
          (mode.mustFail && firstDenial !== undefined && Date.now() - firstDenial > SETTLE_MS)
        )
          throw new StepFailed(step.what, lastError);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };

  const boundSteps = (probe: Probe, ctx: ProbeContext) =>
    probe.steps(ctx).map((step) => ({
      what: `${probe.id}: ${step.what}`,
      ...(step.run ? { run: () => step.run!(ctx) } : {}),
      ...(step.until ? { until: () => step.until!(ctx) } : {}),
    }));

  /** Clean-ups as admin, with no admission registered (the next operator start registers it again). */
  const cleanUp = async (contexts: ProbeContext[]) => {
    await admin.delete(
      `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${VALIDATING_CONFIGURATION_NAME}`,
    );
    await admin.delete(
      `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${MUTATING_CONFIGURATION_NAME}`,
    );
    for (const ctx of contexts) for (const fn of ctx.cleanup.reverse()) await fn().catch(() => {});
  };

  /**
   * One probe with its own components, expected to fail: the failure (step, reason, and the
   * denials of the users `who` accepts), or undefined when it worked.
   */
  const attemptToFail = async (probe: Probe, who: (username: string) => boolean) => {
    const ctx = newContext();
    await probe.before?.(ctx);
    const mark = audit.mark();
    let platform: RunningComponents | undefined;
    try {
      const steps = boundSteps(probe, ctx);
      if (probe.needs) {
        try {
          platform = await runPlatform(probe.needs, ctx.identity);
          ctx.gatewayUrl = platform.gatewayUrl;
        } catch (err) {
          throw new StepFailed('the components start', err);
        }
        // The features' objects are made once the components' caches have synced, so that
        // they can only reach a component through its watches (made before its first list, an
        // object would be in that list, and the watch's entry would seem unneeded).
        steps.unshift(
          { what: 'the admission webhooks serve', until: webhooksServe },
          { what: 'the components are ready', until: async () => platform!.notReady().length === 0 },
        );
      }
      await runSteps(steps, { mustFail: true, mark });
      return undefined;
    } catch (err) {
      if (!(err instanceof StepFailed)) throw err;
      return { step: err.step, reason: err.message, denials: audit.denialsSince(mark, who) };
    } finally {
      await platform?.stop().catch(() => {});
      await cleanUp([ctx]);
    }
  };

  test('every feature works with each component as its own ServiceAccount, and no request is denied', async () => {
    const contexts = PROBES.map((probe) => ({ probe, ctx: newContext() }));
    for (const { probe, ctx } of contexts) await probe.before?.(ctx);
    const mark = audit.mark();
    const platform = await runPlatform(
      { controllers: CONTROLLER_NAMES, leaderElect: true, gateway: PROBES.some((p) => p.needs?.gateway) },
      'probe-all',
    );
    for (const { ctx } of contexts) {
      // The lease's holder is the identity of this run (the leader election probe checks it).
      ctx.identity = 'probe-all';
      ctx.gatewayUrl = platform.gatewayUrl;
    }
    try {
      await runSteps(
        [
          { what: 'the admission webhooks serve', until: webhooksServe },
          { what: 'the components are ready', until: async () => platform.notReady().length === 0 },
        ],
        { mustFail: false, mark },
      );
      const run = ({ probe, ctx }: (typeof contexts)[number]) =>
        runSteps(boundSteps(probe, ctx), { mustFail: false, mark });
      const results = await Promise.allSettled(contexts.filter(({ probe }) => !probe.apart).map(run));
      // Then the probes that would disturb the others (`Probe.apart`), one at a time.
      for (const apart of contexts.filter(({ probe }) => probe.apart))
        results.push(...(await Promise.allSettled([run(apart)])));
      const failed = results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
      expect(failed).toEqual([]);
      expect(audit.denialsSince(mark).map(describeEvent)).toEqual([]);
      // Sanity: the audit log sees the requests of every component and of the syncers.
      const users = new Set(audit.since(mark).map((e) => e.user.username));
      for (const component of COMPONENTS) expect(users).toContain(userOf(component));
      expect([...users].some(isSyncer), 'a syncer made requests as its own ServiceAccount').toBe(true);
    } finally {
      await platform.stop();
      await cleanUp(contexts.map(({ ctx }) => ctx));
    }
  }, 240_000);

  test('without any one entry of any component rules (or the syncer roles), a feature fails on its denied request', async () => {
    const entries = [...roles].flatMap(([owner, ownerRoles]) =>
      ruleEntries(owner, ownerRoles).map((entry) => ({ ...entry, owner })),
    );
    const keys = entries.map((e) => e.key);
    expect(new Set(keys).size, 'each entry once').toBe(keys.length);
    const unmapped = keys.filter((key) => !(key in PROBE_OF_ENTRY));
    expect(unmapped, 'entries without a probe: add one to PROBE_OF_ENTRY').toEqual([]);
    const stale = Object.keys(PROBE_OF_ENTRY).filter((key) => !keys.includes(key));
    expect(stale, 'probes of entries the chart no longer has').toEqual([]);

    const problems: string[] = [];
    const proof: string[] = [];
    // RBAC_ENTRIES=<regular expression> runs only the entries whose keys match (while working on
    // a component's rules); the checks above still cover every entry.
    const only = process.env.RBAC_ENTRIES ? new RegExp(process.env.RBAC_ENTRIES) : undefined;
    // Each probe's admin preparation runs with no admission registered (the operator it starts
    // registers it), as after any run's clean-up: also when this test runs alone (`-t`).
    await cleanUp([]);
    for (const entry of entries.filter((e) => !only || only.test(e.key))) {
      const probe = PROBES.find((p) => p.id === PROBE_OF_ENTRY[entry.key])!;
      await setRules(entry.role, rulesWithout(entry.role.rules as PolicyRule[], entry));
      await waitUntilAllowed(entry, false);
      let failure: Awaited<ReturnType<typeof attemptToFail>>;
      try {
        failure = await attemptToFail(probe, usersOf(entry.owner));
      } finally {
        await setRules(entry.role, entry.role.rules as PolicyRule[]);
        await waitUntilAllowed(entry, true);
      }
      if (!failure) problems.push(`${entry.key}: ${probe.id} still works without it`);
      else if (failure.denials.length === 0)
        problems.push(`${entry.key}: ${failure.reason}, but no request of ${entry.owner} was denied`);
      else proof.push(`${entry.key} -> ${failure.step} (denied: ${describeEvent(failure.denials[0]!)})`);
    }
    console.info(`each rule entry and what fails without it:\n${proof.join('\n')}`);
    // Joined, so that a failure's first line names the entries (an array shows as `[ Array(1) ]`).
    expect(problems.join('; '), 'entries not shown necessary').toBe('');
  }, 1_800_000);

  test('only the gateway may impersonate', async () => {
    const may = async (component: Component, resource: string, group = '') =>
      (
        await admin.create('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: userOf(component),
            groups: SA_GROUPS,
            resourceAttributes: { verb: 'impersonate', group, resource, name: 'someone' },
          },
        })
      ).status.allowed === true;
    const impersonating = [];
    for (const component of COMPONENTS)
      for (const [resource, group] of [
        ['users', ''],
        ['groups', ''],
        ['serviceaccounts', ''],
        ['uids', 'authentication.k8s.io'],
        ['userextras/management.platform/access-key', 'authentication.k8s.io'],
      ] as const)
        if (await may(component, resource, group)) impersonating.push(`${component}: ${resource}`);
    expect(impersonating).toEqual([
      'gateway: users',
      'gateway: groups',
      'gateway: userextras/management.platform/access-key',
    ]);
  });

  test('the project roles aggregate admin, edit and view, with the platform kinds added', async () => {
    const ns = uniqueName('roles');
    await admin.create('/api/v1/namespaces', { metadata: { name: ns } });
    for (const [user, role] of [
      ['a', 'platform-project-admin'],
      ['u', 'platform-project-user'],
      ['v', 'platform-project-viewer'],
    ] as const) {
      await admin.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      });
    }
    const may = async (user: string, verb: string, resource: string, group = 'management.platform') =>
      (
        await admin.create('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: { user, resourceAttributes: { namespace: ns, verb, group, resource } },
        })
      ).status.allowed === true;
    const expected: Array<[string, string, string, string, boolean]> = [
      ['v', 'list', 'virtualclusterinstances', 'management.platform', true],
      ['v', 'list', 'pods', '', true],
      ['v', 'get', 'sharedsecrets', 'management.platform', false],
      ['v', 'create', 'virtualclusterinstances', 'management.platform', false],
      ['u', 'create', 'sharedsecrets', 'management.platform', true],
      ['u', 'delete', 'virtualclusterinstances', 'management.platform', true],
      ['u', 'create', 'deployments', 'apps', true],
      ['u', 'create', 'rolebindings', 'rbac.authorization.k8s.io', false],
      ['a', 'create', 'rolebindings', 'rbac.authorization.k8s.io', true],
      ['a', 'update', 'sharedsecrets', 'management.platform', true],
      ['a', 'list', 'virtualclusterinstances', 'management.platform', true],
      ['a', 'patch', 'sharedsecrets/status', 'management.platform', false],
    ];
    await eventually(
      async () => {
        for (const [user, verb, resource, group, allowed] of expected)
          if ((await may(user, verb, resource, group)) !== allowed) return false;
        return true;
      },
      60_000,
      'the aggregated project roles',
    );
  });

  /** Replaces a role's rules (admin; RBAC takes it up asynchronously). */
  async function setRules(role: Manifest, rules: PolicyRule[]): Promise<void> {
    const path =
      role.kind === 'Role'
        ? `/apis/rbac.authorization.k8s.io/v1/namespaces/${role.metadata.namespace}/roles/${role.metadata.name}`
        : `/apis/rbac.authorization.k8s.io/v1/clusterroles/${role.metadata.name}`;
    const current = await admin.ok('GET', path);
    await admin.ok('PUT', path, { body: { ...current, rules } });
  }

  /** Waits until the authorizer answers for the entry as RBAC now says (its cache lags the write). */
  async function waitUntilAllowed(entry: RuleEntry & { owner: string }, allowed: boolean): Promise<void> {
    const subject =
      entry.owner === SYNCER
        ? {
            user: `system:serviceaccount:${SYNCER_CHECK.namespace}:${SYNCER_CHECK.name}`,
            namespace: SYNCER_CHECK.namespace,
          }
        : { user: userOf(entry.owner as Component), namespace: NAMESPACE };
    await eventually(
      async () =>
        (
          await admin.create('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            spec: {
              user: subject.user,
              groups: SA_GROUPS,
              resourceAttributes: accessAttributes(entry, subject.namespace),
            },
          })
        ).status.allowed === allowed,
      10_000,
      `RBAC to ${allowed ? 'allow' : 'deny'} ${entry.key}`,
    );
  }
});

/** The Roles and ClusterRoles the chart binds to one ServiceAccount. */
function boundRoles(manifests: Manifest[], serviceAccount: string): Manifest[] {
  const isOurs = (binding: Manifest) =>
    (binding.subjects as Array<{ kind: string; name: string; namespace?: string }>).some(
      (s) => s.kind === 'ServiceAccount' && s.name === serviceAccount && s.namespace === NAMESPACE,
    );
  return manifests
    .filter((m) => (m.kind === 'ClusterRoleBinding' || m.kind === 'RoleBinding') && isOurs(m))
    .map((binding) => find(manifests, binding.roleRef.kind, binding.roleRef.name as string));
}

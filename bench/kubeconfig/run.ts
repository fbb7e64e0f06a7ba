/**
 * Kubeconfigs and direct tokens through the gateway, each beside the raw cost of its main step,
 * measured in the same run at the same concurrency. One control plane of its own with two
 * clusters: the host (our CRDs, the admission webhooks, a Manager with no controllers and the
 * management gateway on plain HTTP, all in this process, as in e2e/gateway/support.ts) and a
 * virtual cluster (one more kube-apiserver, with kube-controller-manager for CSR signing) that a
 * VirtualClusterInstance `p-bench/vc` of the Project `bench` points at. A platform admin `alice`
 * calls the gateway with her access key.
 *
 * 1. Token-mode kubeconfigs (`POST .../virtualclusterinstances/vc/kubeconfig`, `{spec: {}}`): the
 *    gateway authenticates, authorizes (SubjectAccessReview), reads the instance and creates a key
 *    for alice scoped to the virtual cluster. Baseline: that key create alone, straight to
 *    kube-apiserver as admin (`spec.key` hashed by the same admission webhooks).
 * 2. Certificate-mode kubeconfigs (`{spec: {clientCert: true}}`): as 1, then the instance's
 *    credentials Secret and a CSR round trip in the virtual cluster (create, approve, poll for the
 *    certificate, delete). Baseline: `requestClientCertificate` straight to the virtual cluster
 *    with its admin kubeconfig, for the same username and groups, 86400 s.
 * 3. Direct tokens (`POST .../directclusterendpointtokens`, `{spec: {ttl: 600}}`): authentication,
 *    the key ring (cached) and an ES256 signature (the private JWK imported per token). Baseline: a
 *    bare `jose` ES256 signature of the same claims with an imported key, in process.
 *
 * The load generator (fetch) shares this process with the gateway and the webhooks. Prints for
 * each: operations per second and p50/p99 latency of ours and of the baseline, and the ratio of
 * the rates (ours / baseline).
 *
 *   bench/kubeconfig/run.sh [KEYS=100] [CERTIFICATES=40] [TOKENS=200] [CONCURRENCY=4]
 *
 * `BENCH_LOG=1` shows the gateway's and the webhooks' warnings on stderr.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { decodeJwt, importJWK, type JWTPayload, SignJWT } from 'jose';
import pino from 'pino';
import { parse as parseYaml } from 'yaml';
import { waitUntilWebhooksServe } from '../../e2e/support/webhooks-ready.ts';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import {
  DEFAULT_CERTIFICATE_TTL_SECONDS,
  requestClientCertificate,
} from '../../src/clusters/client-certificate.ts';
import { ensureControlPlaneBinary } from '../../src/dev/binaries.ts';
import { ControlPlane } from '../../src/dev/controlplane.ts';
import { installCrds } from '../../src/dev/install-crds.ts';
import { BASE_PATH, type Gateway } from '../../src/gateway/index.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { generateSigningKey, SIGNING_ALGORITHM } from '../../src/identity/signing-keys.ts';
import { systemClock } from '../../src/runtime/clock.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { type AdmissionWebhooks, startAdmissionWebhooks } from '../../src/webhooks/index.ts';
import { benchMode, gatewayOnly, pool, quantile, reportFigure } from '../support.ts';

const smoke = benchMode() === 'smoke';
const KEYS = Number(process.argv[2] ?? (smoke ? 10 : 100));
const CERTIFICATES = Number(process.argv[3] ?? (smoke ? 4 : 40));
const TOKENS = Number(process.argv[4] ?? (smoke ? 20 : 200));
const CONCURRENCY = Number(process.argv[5] ?? 4);
const PLATFORM_NAMESPACE = 'platform-system';
const GROUP_VERSION = `${API_GROUP}/${API_VERSION}`;
const PROJECT = 'bench';
const NAMESPACE = `p-${PROJECT}`;
const INSTANCE = 'vc';
const USER = 'alice';
const quiet = pino({ level: 'silent' });
const logger = process.env.BENCH_LOG ? pino({ level: 'warn' }, pino.destination(2)) : quiet;
const random = (size: number) => randomBytes(size);

/** A tenth of the measured count, at least 3: connections, JIT and the apiservers' caches. */
const warmupOf = (count: number) => Math.max(3, Math.ceil(count / 10));

interface Run {
  readonly count: number;
  readonly seconds: number;
  /** Milliseconds per successful operation. */
  readonly latencies: number[];
  readonly failures: number;
  readonly firstFailure: string | undefined;
}

/** `count` operations, `concurrency` in flight, after a warm-up whose failures are fatal. */
async function measure(count: number, op: () => Promise<unknown>): Promise<Run> {
  await pool(warmupOf(count), CONCURRENCY, op);
  const latencies: number[] = [];
  let failures = 0;
  let firstFailure: string | undefined;
  const start = performance.now();
  await pool(count, CONCURRENCY, async () => {
    const began = performance.now();
    try {
      await op();
      latencies.push(performance.now() - began);
    } catch (err) {
      failures++;
      firstFailure ??= err instanceof Error ? err.message : String(err);
    }
  });
  return { count, seconds: (performance.now() - start) / 1000, latencies, failures, firstFailure };
}

const rate = (run: Run) => run.latencies.length / run.seconds;

function report(title: string, oursLabel: string, ours: Run, baseLabel: string, base: Run): string {
  reportFigure({
    name: `${title}: ${oursLabel}`,
    value: rate(ours),
    unit: 'ops/s',
    baseline: { name: baseLabel, value: rate(base), unit: 'ops/s' },
    ratio: rate(ours) / rate(base),
  });
  const row = (label: string, run: Run) =>
    `  ${label.padEnd(58)} ${rate(run).toFixed(1).padStart(8)} ops/s  p50 ${quantile(run.latencies, 0.5).toFixed(2).padStart(8)} ms  p99 ${quantile(run.latencies, 0.99).toFixed(2).padStart(8)} ms`;
  const failed = [ours, base]
    .filter((run) => run.failures > 0)
    .map((run) => `  ${run.failures} of ${run.count} failed, first: ${run.firstFailure}`);
  return [
    `${title} (${ours.count} each, concurrency ${CONCURRENCY})`,
    row(oursLabel, ours),
    row(`baseline: ${baseLabel}`, base),
    `  ratio: ${(rate(ours) / rate(base)).toFixed(3)}x (ours/baseline ops/s)  added latency p50 ${(quantile(ours.latencies, 0.5) - quantile(base.latencies, 0.5)).toFixed(2)} ms, p99 ${(quantile(ours.latencies, 0.99) - quantile(base.latencies, 0.99)).toFixed(2)} ms`,
    ...failed,
  ].join('\n');
}

/** A POST to the gateway as `token`; the parsed answer, or an error unless it is 201. */
async function post<T>(url: string, token: string, body: unknown): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`HTTP ${response.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

interface KubeConfigAnswer {
  status: { kubeConfig: string };
}
interface KubeConfigUser {
  token?: string;
  'client-certificate-data'?: string;
}

const userOf = (answer: KubeConfigAnswer): KubeConfigUser =>
  (parseYaml(answer.status.kubeConfig) as { users: { user: KubeConfigUser }[] }).users[0]!.user;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const binary = await ensureControlPlaneBinary(() => {});
  const stateDir = mkdtempSync(join(tmpdir(), 'platform-bench-kubeconfig-'));
  const plane = await ControlPlane.start({ stateDir, binary });
  let webhooks: AdmissionWebhooks | undefined;
  let manager: Manager | undefined;
  let gateway: Gateway | undefined;
  try {
    const host = await plane.startCluster({ name: 'host' });
    const virtual = await plane.startCluster({ name: 'virtual', controllerManager: true });
    const kc = new KubeConfig();
    kc.loadFromFile(host.kubeconfigPath);
    await installCrds(kc);
    const core = kc.makeApiClient(CoreV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const api = new KubeClient(kc);
    await core.createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
    await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
      body: {
        metadata: { name: 'platform-admins' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:admins' }],
      },
    });
    webhooks = await startAdmissionWebhooks({
      kubeConfig: kc,
      host: '127.0.0.1',
      port: 0,
      platformNamespace: PLATFORM_NAMESPACE,
      endpoint: 'local',
      certificates: { mode: 'self-managed' },
    });
    await waitUntilWebhooksServe(custom);

    // The project, its namespace (the prefix `p-` maps it), the virtual cluster and its credentials.
    await custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'projects',
      body: { apiVersion: GROUP_VERSION, kind: 'Project', metadata: { name: PROJECT }, spec: {} },
    });
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    await core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'vc-credentials' },
        stringData: { kubeconfig: readFileSync(virtual.kubeconfigPath, 'utf8') },
      },
    });
    await custom.createNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: NAMESPACE,
      plural: 'virtualclusterinstances',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'VirtualClusterInstance',
        metadata: { name: INSTANCE },
        spec: {
          accessPoint: { ingress: { enabled: true } },
          endpoint: virtual.server,
          caData: Buffer.from(virtual.caPem).toString('base64'),
          credentialsSecretRef: { name: 'vc-credentials' },
        },
      },
    });
    await custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'users',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'User',
        metadata: { name: USER },
        spec: { username: USER, clusterRoles: [{ name: 'platform-admin' }] },
      },
    });
    const alice = generateAccessKey(random).key;
    await custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'ownedaccesskeys',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'OwnedAccessKey',
        metadata: { name: USER },
        spec: { user: USER, type: 'User', key: alice },
      },
    });

    ({ manager, gateway } = gatewayOnly(host.kubeconfigPath, PLATFORM_NAMESPACE, logger));
    await manager.start();
    const server = await gateway.start();
    const base = `${server.url}${BASE_PATH}`;
    for (const deadline = Date.now() + 60_000; ; ) {
      const probe = gateway.ready()
        ? await fetch(`${base}/apis`, { headers: { authorization: `Bearer ${alice}` } })
        : undefined;
      await probe?.arrayBuffer();
      if (probe?.status === 200) break;
      if (Date.now() > deadline) throw new Error('the gateway did not accept the key in 60 s');
      await sleep(200);
    }
    const groupApi = `${base}/apis/${GROUP_VERSION}`;
    const kubeConfigUrl = `${groupApi}/namespaces/${NAMESPACE}/virtualclusterinstances/${INSTANCE}/kubeconfig`;

    // The first answers of each endpoint, checked: they also tell the identity and the claims the
    // baselines reproduce.
    const tokenUser = userOf(await post<KubeConfigAnswer>(kubeConfigUrl, alice, { spec: {} }));
    if (!tokenUser.token?.startsWith('pak_')) throw new Error('token mode: the kubeconfig has no access key');
    const certUser = userOf(
      await post<KubeConfigAnswer>(kubeConfigUrl, alice, { spec: { clientCert: true } }),
    );
    const certificate = new X509Certificate(
      Buffer.from(certUser['client-certificate-data'] ?? '', 'base64').toString('utf8'),
    );
    // The subject as an object: repeated attributes (one O per group) come as arrays.
    const subject = certificate.toLegacyObject().subject as unknown as Record<string, string | string[]>;
    const username = String(subject.CN ?? '');
    const groups = [subject.O ?? []].flat();
    if (username !== USER) throw new Error(`certificate mode: unexpected subject ${certificate.subject}`);
    const { status: minted } = await post<{ status: { token: string } }>(
      `${groupApi}/directclusterendpointtokens`,
      alice,
      { spec: { ttl: 600 } },
    );
    const claims: JWTPayload = decodeJwt(minted.token);
    console.log(
      `kubeconfig benchmark: concurrency ${CONCURRENCY}, each run after a warm-up of a tenth of its count (at least 3); caller ${username} (groups ${groups.join(', ')})`,
    );

    // 1. Token mode vs creating the access key directly.
    const keyPath = `/apis/${GROUP_VERSION}/ownedaccesskeys`;
    let keyNumber = 0;
    const tokenMode = await measure(KEYS, () => post<KubeConfigAnswer>(kubeConfigUrl, alice, { spec: {} }));
    const keyCreate = await measure(KEYS, () =>
      api.request({
        method: 'POST',
        path: keyPath,
        body: {
          apiVersion: GROUP_VERSION,
          kind: 'OwnedAccessKey',
          metadata: { name: `direct-${keyNumber++}` },
          spec: {
            user: USER,
            type: 'Other',
            displayName: `kubeconfig for virtual cluster ${INSTANCE} in project ${PROJECT}`,
            scope: { virtualClusters: [{ project: PROJECT, virtualCluster: INSTANCE }] },
            key: generateAccessKey(random).key,
          },
        },
      }),
    );
    console.log(
      report(
        'token-mode kubeconfigs',
        'kubeconfig through the gateway',
        tokenMode,
        'access key create, admin to kube-apiserver',
        keyCreate,
      ),
    );

    // 2. Certificate mode vs the CSR round trip directly against the virtual cluster.
    const virtualKc = new KubeConfig();
    virtualKc.loadFromFile(virtual.kubeconfigPath);
    const virtualApi = new KubeClient(virtualKc);
    const certMode = await measure(CERTIFICATES, () =>
      post<KubeConfigAnswer>(kubeConfigUrl, alice, { spec: { clientCert: true } }),
    );
    const csr = await measure(CERTIFICATES, () =>
      requestClientCertificate(virtualApi, systemClock, {
        username,
        groups,
        expirationSeconds: DEFAULT_CERTIFICATE_TTL_SECONDS,
        timeoutMs: 30_000,
      }),
    );
    virtualApi.close();
    console.log(
      report(
        'certificate-mode kubeconfigs',
        'kubeconfig through the gateway',
        certMode,
        'requestClientCertificate to the virtual cluster',
        csr,
      ),
    );

    // 3. Direct tokens vs a bare jose ES256 signature of the same claims.
    const signing = await generateSigningKey();
    const privateKey = await importJWK(signing.privateJwk, SIGNING_ALGORITHM);
    const tokens = await measure(TOKENS, () =>
      post(`${groupApi}/directclusterendpointtokens`, alice, { spec: { ttl: 600 } }),
    );
    const signatures = await measure(TOKENS, () =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: SIGNING_ALGORITHM, kid: signing.kid, typ: 'JWT' })
        .sign(privateKey),
    );
    console.log(
      report(
        'direct cluster endpoint tokens',
        'token through the gateway',
        tokens,
        'bare jose ES256 signature (same claims)',
        signatures,
      ),
    );
  } finally {
    await gateway?.stop();
    await manager?.stop();
    await webhooks?.stop();
    await plane.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);

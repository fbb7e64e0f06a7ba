import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { createCertificateAuthority, issueCertificate } from '../../src/pki/certificates.ts';
import { splitPemBundle } from '../../src/pki/planning.ts';
import type { SelfManagedCertificates } from '../../src/webhooks/certificates/self-managed.ts';
import { startAdmissionWebhooks } from '../../src/webhooks/index.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import {
  expectCause,
  kubectlOn,
  PLATFORM_NAMESPACE,
  rejectionOf,
  sharedSecretBody,
  useWebhookEnv,
  type WebhookEnv,
} from './support.ts';

/** kube-apiserver's `names.SimpleNameGenerator`: the prefix cut to 58 characters, then five of this alphabet. */
const MAX_PREFIX_LENGTH = 58;
const SUFFIX_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

const env = useWebhookEnv();
const GV = { group: API_GROUP, version: API_VERSION };
const SUFFIX = new RegExp(`^[${SUFFIX_ALPHABET}]{5}$`);

type Obj = { metadata: Record<string, unknown> & { name: string }; spec?: Record<string, unknown> };

const sharedSecrets = (e: WebhookEnv) => ({
  create: (body: object) =>
    e.custom.createNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: 'default',
      body,
    }) as Promise<Obj>,
  get: (name: string) =>
    e.custom.getNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: 'default',
      name,
    }) as Promise<Obj>,
  replace: (name: string, body: object) =>
    e.custom.replaceNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: 'default',
      name,
      body,
    }) as Promise<Obj>,
  remove: (name: string, gracePeriodSeconds?: number) =>
    e.custom.deleteNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: 'default',
      name,
      ...(gracePeriodSeconds !== undefined ? { gracePeriodSeconds } : {}),
    }),
});

describe('generateName through CRDs + webhooks (kube-apiserver generates, we do not interfere)', () => {
  it('appends five random characters to a short prefix', async () => {
    const created = await sharedSecrets(env()).create({
      ...sharedSecretBody(''),
      metadata: { generateName: 'db-' },
    });
    expect(created.metadata.name.startsWith('db-')).toBe(true);
    expect(created.metadata.name.slice(3)).toMatch(SUFFIX);
  });

  it('truncates a long prefix to 58 characters, for namespaced and cluster-scoped (mutated) kinds', async () => {
    const e = env();
    const prefix = `${'long-prefix-'.repeat(8)}x-`;
    const secret = await sharedSecrets(e).create({
      ...sharedSecretBody(''),
      metadata: { generateName: prefix },
    });
    const key = (await e.custom.createClusterCustomObject({
      ...GV,
      plural: 'ownedaccesskeys',
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'OwnedAccessKey',
        metadata: { generateName: prefix },
        spec: { user: 'alice', key: generateAccessKey(randomBytes).key },
      },
    })) as Obj;
    for (const name of [secret.metadata.name, key.metadata.name]) {
      expect(name).toHaveLength(63);
      expect(name.slice(0, MAX_PREFIX_LENGTH)).toBe(prefix.slice(0, MAX_PREFIX_LENGTH));
      expect(name.slice(MAX_PREFIX_LENGTH)).toMatch(SUFFIX);
    }
  });

  it('answers 409 AlreadyExists for a name that exists (client-node and kubectl)', async () => {
    const e = env();
    const name = uniqueName('dup');
    await sharedSecrets(e).create(sharedSecretBody(name));
    const refused = await rejectionOf(sharedSecrets(e).create(sharedSecretBody(name)));
    expect(refused.code).toBe(409);
    expect(refused.reason).toBe('AlreadyExists');
    const run = await kubectlOn(
      e,
      ['create', '-n', 'default', '-f', '-'],
      JSON.stringify(sharedSecretBody(name)),
    );
    expect(run.stderr).toContain(
      `Error from server (AlreadyExists): error when creating "STDIN": sharedsecrets.management.platform "${name}" already exists`,
    );
  });
});

describe('metadata invariants kube-apiserver enforces for our kinds', () => {
  it('uid cannot change (409 precondition); a different name in the body is refused (400); creationTimestamp is kept', async () => {
    const e = env();
    const api = sharedSecrets(e);
    const name = uniqueName('meta');
    const created = await api.create(sharedSecretBody(name));
    const uid = await rejectionOf(
      api.replace(name, {
        ...created,
        metadata: { ...created.metadata, uid: '00000000-0000-0000-0000-000000000000' },
      }),
    );
    // kube-apiserver reads a body uid as a precondition on the stored object.
    expect(uid.code).toBe(409);
    expect(uid.reason).toBe('Conflict');
    expect(uid.message).toMatch(/Precondition failed: UID in precondition/);
    expect((await api.get(name)).metadata.uid).toBe(created.metadata.uid);
    const renamed = await rejectionOf(
      api.replace(name, { ...created, metadata: { ...created.metadata, name: `${name}-x` } }),
    );
    expect(renamed.code).toBe(400);
    const updated = await api.replace(name, {
      ...created,
      metadata: { ...created.metadata, creationTimestamp: '2001-01-01T00:00:00Z' },
    });
    expect(updated.metadata.creationTimestamp).toBe(created.metadata.creationTimestamp);
  });

  it('while deleting: deletionTimestamp cannot be unset or moved later, no finalizer can be added, any can be removed', async () => {
    const e = env();
    const api = sharedSecrets(e);
    const name = uniqueName('fin');
    await api.create({
      ...sharedSecretBody(name),
      metadata: { name, finalizers: ['example.com/a', 'example.com/b'] },
    });
    await api.remove(name, 30);
    const deleting = await api.get(name);
    const deletionTimestamp = deleting.metadata.deletionTimestamp as string;
    expect(deletionTimestamp).toBeDefined();
    // A later delete with a longer grace period does not move the deadline.
    await api.remove(name, 3600);
    expect((await api.get(name)).metadata.deletionTimestamp).toBe(deletionTimestamp);
    const unset = await api.replace(name, {
      ...deleting,
      metadata: { ...deleting.metadata, deletionTimestamp: undefined, deletionGracePeriodSeconds: undefined },
    });
    expect(unset.metadata.deletionTimestamp).toBe(deletionTimestamp);
    const added = await rejectionOf(
      api.replace(name, {
        ...unset,
        metadata: { ...unset.metadata, finalizers: ['example.com/a', 'example.com/b', 'example.com/c'] },
      }),
    );
    expect(added.code).toBe(422);
    expectCause(
      added,
      'metadata.finalizers',
      /no new finalizers can be added if the object is being deleted/,
    );
    // Removal in any order: the second one first.
    const afterB = await api.replace(name, {
      ...unset,
      metadata: { ...unset.metadata, finalizers: ['example.com/a'] },
    });
    await api.replace(name, { ...afterB, metadata: { ...afterB.metadata, finalizers: [] } });
    const gone = await rejectionOf(api.get(name));
    expect(gone.code).toBe(404);
  });
});

describe('fail closed', () => {
  it('with the webhook down, writes to our kinds are refused; unrelated kinds are unaffected', async () => {
    const e = env();
    await e.webhooks.stop();
    try {
      const refused = await rejectionOf(sharedSecrets(e).create(sharedSecretBody(uniqueName('down'))));
      expect(refused.code).toBe(500);
      expect(refused.message).toContain('failed calling webhook "resources.validate.management.platform"');
      await e.core.createNamespacedConfigMap({
        namespace: 'default',
        body: { metadata: { name: uniqueName('cm') } },
      });
      await e.core.createNamespacedSecret({
        namespace: 'default',
        body: { metadata: { name: uniqueName('plain') } },
      });
      const run = await kubectlOn(e, ['create', 'configmap', uniqueName('cm'), '-n', 'default']);
      expect(run.code, run.stderr).toBe(0);
    } finally {
      await e.restartWebhooks();
    }
    await sharedSecrets(e).create(sharedSecretBody(uniqueName('up')));
  });
});

/** Our 422 for an invalid SharedSecret (a dry run), not "failed calling webhook": TLS to the webhook works. */
async function expectAdmissionAnswers(e: WebhookEnv): Promise<void> {
  const probe = await rejectionOf(
    e.custom.createNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: 'default',
      dryRun: 'All',
      body: sharedSecretBody('probe', [{ verbs: ['not-a-verb'] }]),
    }),
  );
  expect(probe.code, probe.message).toBe(422);
}

describe('certificate rotation', () => {
  it('keeps admission working while the serving certificate and the CA rotate', async () => {
    const e = env();
    // Validity windows (notBefore is backdated 60 s) such that renewal is due seconds after issue:
    // due when less than half of the window remains.
    await e.restartWebhooks(
      { caValidSeconds: 80, servingValidSeconds: 70, renewBeforeFraction: 0.5, caPropagationSeconds: 2 },
      'webhook-serving-short-lived',
    );
    const certificates = e.webhooks.certificates as SelfManagedCertificates;
    // The steps are seen in what is served, whoever took them: the test's reconcile() or the
    // rotation controller, which wakes when a renewal falls due and may come first.
    const issuerOf = () => new X509Certificate(certificates.current().certPem).issuer;
    const servedCerts = new Set<string>([certificates.current().certPem]);
    const issuers = new Set<string>([issuerOf()]);
    let largestBundle = 1;
    // A new CA staged (a bundle of two), promoted (certificates issued by another CA), and the
    // serving certificate renewed on the way.
    while (!(largestBundle >= 2 && issuers.size >= 2 && servedCerts.size >= 3)) {
      await certificates.reconcile();
      servedCerts.add(certificates.current().certPem);
      issuers.add(issuerOf());
      largestBundle = Math.max(largestBundle, splitPemBundle(certificates.current().caBundlePem).length);
      // Admission still answers after every step.
      await expectAdmissionAnswers(e);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(largestBundle).toBeGreaterThanOrEqual(2);
    const issuer = new X509Certificate(certificates.current().certPem).issuer;
    expect(issuer).toContain('platform-webhook-ca-');
    // The configurations carry the bundle the certificates were last issued under.
    const vwc = e.webhooks.configurations().validating as unknown as {
      webhooks: { clientConfig: { caBundle: string } }[];
    };
    expect(Buffer.from(vwc.webhooks[0]!.clientConfig.caBundle, 'base64').toString()).toBe(
      certificates.current().caBundlePem,
    );
  });

  it('renews on its own: the rotation is a controller of the Manager, reconciling the Secret when its renewal falls due', async () => {
    const e = env();
    // Renewal of the serving certificate is due about 5 s after each issue (see above); the CA not.
    await e.restartWebhooks(
      { caValidSeconds: 3600, servingValidSeconds: 70, renewBeforeFraction: 0.5 },
      'webhook-serving-self-renewing',
    );
    const certificates = e.webhooks.certificates as SelfManagedCertificates;
    const first = certificates.current().certPem;
    // Nobody calls reconcile() here: only the controller's requeues can swap the certificate.
    while (certificates.current().certPem === first) await new Promise((resolve) => setTimeout(resolve, 500));
    await expectAdmissionAnswers(e);
    expect(new X509Certificate(certificates.current().certPem).issuer).toBe(
      new X509Certificate(first).issuer,
    );
  });

  it('adopts a change of the Secret when its watch event arrives: an edit that breaks the serving certificate is repaired', async () => {
    const e = env();
    // Nothing falls due for an hour: only the Secret's watch can bring the rotation to look.
    const secretName = 'webhook-serving-watched';
    await e.restartWebhooks({ caValidSeconds: 7200, servingValidSeconds: 7200 }, secretName);
    const certificates = e.webhooks.certificates as SelfManagedCertificates;
    const served = certificates.current().certPem;
    const core = e.kc.makeApiClient(CoreV1Api);
    const secret = await core.readNamespacedSecret({ name: secretName, namespace: PLATFORM_NAMESPACE });
    // The CA's own certificate in the serving certificate's place: it names no webhook address.
    await core.replaceNamespacedSecret({
      name: secretName,
      namespace: PLATFORM_NAMESPACE,
      body: { ...secret, data: { ...secret.data, 'tls.crt': secret.data!['ca.crt']! } },
    });
    await eventually(
      async () => {
        const now = await core.readNamespacedSecret({ name: secretName, namespace: PLATFORM_NAMESPACE });
        const certificate = Buffer.from(now.data!['tls.crt']!, 'base64').toString();
        return (
          certificate !== Buffer.from(secret.data!['ca.crt']!, 'base64').toString() &&
          certificates.current().certPem !== served
        );
      },
      30_000,
      'the serving certificate re-issued after the edit',
    );
    await expectAdmissionAnswers(e);
  });
});

describe('mounted certificates (cert-manager)', () => {
  /** The fingerprint of the certificate the server at `port` presents. */
  const servedFingerprint = (port: number) =>
    new Promise<string>((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
        const fingerprint = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
        socket.end();
        resolve(fingerprint);
      });
      socket.on('error', reject);
    });

  async function writeMountedCertificates(directory: string, caName: string): Promise<string> {
    const ca = await createCertificateAuthority(caName, 3600);
    const serving = await issueCertificate(ca, {
      commonName: 'localhost',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
      validForSeconds: 3600,
    });
    writeFileSync(join(directory, 'ca.crt'), ca.certPem);
    writeFileSync(join(directory, 'tls.key'), serving.keyPem);
    writeFileSync(join(directory, 'tls.crt'), serving.certPem);
    return new X509Certificate(serving.certPem).fingerprint256;
  }

  it('serves the mounted files and swaps to new ones when they change, without a restart', async () => {
    const e = env();
    const directory = mkdtempSync(join(tmpdir(), 'platform-webhook-mounted-'));
    const first = await writeMountedCertificates(directory, 'mounted-ca-1');
    const webhooks = await startAdmissionWebhooks({
      kubeConfig: e.kc,
      host: '127.0.0.1',
      port: 0,
      platformNamespace: 'platform',
      endpoint: 'local',
      certificates: { mode: 'mounted', directory },
      registerConfigurations: false,
    });
    try {
      expect(await servedFingerprint(webhooks.server.port)).toBe(first);
      const second = await writeMountedCertificates(directory, 'mounted-ca-2');
      while ((await servedFingerprint(webhooks.server.port)) !== second) {
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      expect(webhooks.certificates.current().caBundlePem).toContain('-----BEGIN CERTIFICATE-----');
      expect(new X509Certificate(webhooks.certificates.current().caBundlePem).subject).toContain(
        'mounted-ca-2',
      );
    } finally {
      await webhooks.stop();
    }
  });
});

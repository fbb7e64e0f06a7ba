import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { issueCertificate } from '../pki/certificates.ts';
import { ADMIN_KEYS, PKI_KEYS } from './control-plane.ts';
import {
  ADMIN_USER,
  buildInstancePki,
  ensureInstancePki,
  planInstancePki,
  RENEW_BEFORE,
  type SecretText,
} from './pki.ts';

const DAY_MS = 24 * 3600 * 1000;
const instance = {
  namespace: 'p-team',
  name: 'dev',
  endpoint: 'https://127.0.0.1:40001',
  apiServerPort: 40001,
};
const start = new Date('2026-01-01T00:00:00Z');

let fresh: { pki: SecretText; admin: SecretText };
beforeAll(async () => {
  fresh = await ensureInstancePki({ pki: undefined, admin: undefined }, instance, start);
});

const kubeconfigOf = (text: string | undefined) =>
  parseYaml(text ?? '') as {
    clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
    users: { user: Record<string, string> }[];
  };

describe('planInstancePki', () => {
  it('makes everything when nothing exists, and says why', () => {
    const plan = planInstancePki({ pki: undefined, admin: undefined }, instance, start.getTime());
    expect(plan).toMatchObject({
      ca: 'make',
      serviceAccountKeys: 'make',
      serving: 'make',
      admin: 'make',
      controllerManager: 'make',
    });
    expect(plan.reasons).toContain('the CA is missing');
  });

  it('keeps everything it made, and building again changes no byte', async () => {
    const plan = planInstancePki(fresh, instance, start.getTime() + DAY_MS);
    expect(plan).toEqual({
      ca: 'keep',
      serviceAccountKeys: 'keep',
      serving: 'keep',
      admin: 'keep',
      controllerManager: 'keep',
      reasons: [],
    });
    expect(await buildInstancePki(fresh, plan, instance, start)).toEqual({
      pki: fresh.pki,
      admin: fresh.admin,
    });
  });

  it('makes the leaves again near their end, and keeps the longer-lived CA', () => {
    const leafEnd = Date.parse(new X509Certificate(fresh.pki[PKI_KEYS.servingCert]!).validTo);
    const late = leafEnd - ('seconds' in RENEW_BEFORE ? RENEW_BEFORE.seconds * 1000 : 0) + DAY_MS;
    const plan = planInstancePki(fresh, instance, late);
    expect(plan).toMatchObject({ ca: 'keep', serving: 'make', admin: 'make', controllerManager: 'make' });
    expect(plan.reasons).toContain('the serving certificate is about to expire');
  });

  it('makes every leaf again when the CA is made again', async () => {
    const other = await ensureInstancePki({ pki: undefined, admin: undefined }, instance, start);
    const mixed = {
      pki: { ...fresh.pki, [PKI_KEYS.caCert]: other.pki[PKI_KEYS.caCert]! },
      admin: fresh.admin,
    };
    // The CA certificate no longer matches its key: the CA and every leaf are made again.
    const plan = planInstancePki(mixed, instance, start.getTime());
    expect(plan).toMatchObject({ ca: 'make', serving: 'make', admin: 'make', controllerManager: 'make' });
    expect(plan.reasons).toContain('the CA certificate does not match its key');
    // The leaves of another CA are made again under this one.
    const foreign = { pki: { ...other.pki }, admin: fresh.admin };
    expect(planInstancePki(foreign, instance, start.getTime())).toMatchObject({ ca: 'keep', admin: 'make' });
    const noCa = {
      pki: { ...fresh.pki, [PKI_KEYS.caKey]: undefined } as unknown as SecretText,
      admin: fresh.admin,
    };
    expect(planInstancePki(noCa, instance, start.getTime())).toMatchObject({ ca: 'make', serving: 'make' });
  });

  it('makes the serving certificate again for another instance name', () => {
    const plan = planInstancePki(fresh, { ...instance, name: 'other' }, start.getTime());
    expect(plan.serving).toBe('make');
    expect(plan.reasons.join()).toMatch(/does not name DNS:other\.p-team\.svc/);
  });

  it('makes the admin certificate again when it is not an admin of system:masters', async () => {
    const ca = { certPem: fresh.pki[PKI_KEYS.caCert]!, keyPem: fresh.pki[PKI_KEYS.caKey]! };
    const user = await issueCertificate(
      ca,
      { commonName: 'someone', usage: 'client', validForSeconds: 365 * 24 * 3600 },
      start,
    );
    const plan = planInstancePki(
      { pki: fresh.pki, admin: { ...fresh.admin, [ADMIN_KEYS.clientCert]: user.certPem } },
      instance,
      start.getTime(),
    );
    // The key no longer matches either; with the matching key it is the subject that is wrong.
    expect(plan.admin).toBe('make');
    const withKey = planInstancePki(
      {
        pki: fresh.pki,
        admin: { ...fresh.admin, [ADMIN_KEYS.clientCert]: user.certPem, [ADMIN_KEYS.clientKey]: user.keyPem },
      },
      instance,
      start.getTime(),
    );
    expect(withKey.reasons).toContain(`the admin certificate does not name ${ADMIN_USER} in system:masters`);
  });
});

describe('buildInstancePki', () => {
  it('serves the names the proxy and the syncer dial, for a year, from the instance CA', () => {
    const ca = new X509Certificate(fresh.pki[PKI_KEYS.caCert]!);
    const serving = new X509Certificate(fresh.pki[PKI_KEYS.servingCert]!);
    expect(serving.checkIssued(ca) && serving.verify(ca.publicKey)).toBe(true);
    for (const name of [
      'DNS:localhost',
      'DNS:dev.p-team.svc',
      'DNS:dev.p-team.svc.cluster.local',
      'IP Address:127.0.0.1',
    ])
      expect(serving.subjectAltName?.split(', ')).toContain(name);
    for (const pem of [fresh.pki[PKI_KEYS.servingCert]!, fresh.admin[ADMIN_KEYS.clientCert]!])
      expect(Date.parse(new X509Certificate(pem).validTo) - start.getTime()).toBeGreaterThan(300 * DAY_MS);
  });

  it('gives the admin a kubeconfig with inline credentials to the endpoint, and the CA', () => {
    const config = kubeconfigOf(fresh.admin[ADMIN_KEYS.kubeconfig]);
    expect(config.clusters[0]!.cluster.server).toBe(instance.endpoint);
    const caData = Buffer.from(
      config.clusters[0]!.cluster['certificate-authority-data'],
      'base64',
    ).toString();
    expect(caData).toBe(fresh.pki[PKI_KEYS.caCert]);
    expect(fresh.admin[ADMIN_KEYS.caCert]).toBe(fresh.pki[PKI_KEYS.caCert]);
    expect(Object.keys(config.users[0]!.user).sort()).toEqual(['client-certificate-data', 'client-key-data']);
    const cert = new X509Certificate(
      Buffer.from(config.users[0]!.user['client-certificate-data']!, 'base64'),
    );
    expect(cert.subject.split('\n')).toEqual(
      expect.arrayContaining([`CN=${ADMIN_USER}`, 'O=system:masters']),
    );
  });

  it('renders both kubeconfigs anew: an edited Secret cannot put exec or a token file before a component', async () => {
    const hostile = `apiVersion: v1
kind: Config
users: [{ name: u, user: { exec: { command: /bin/sh, args: [-c, 'touch /tmp/owned'] }, tokenFile: /etc/shadow } }]`;
    const edited = {
      pki: { ...fresh.pki, [PKI_KEYS.controllerManagerKubeconfig]: hostile },
      admin: { ...fresh.admin, [ADMIN_KEYS.kubeconfig]: hostile },
    };
    const again = await ensureInstancePki(edited, instance, start);
    expect(again.pki[PKI_KEYS.controllerManagerKubeconfig]).toBe(
      fresh.pki[PKI_KEYS.controllerManagerKubeconfig],
    );
    expect(again.admin[ADMIN_KEYS.kubeconfig]).toBe(fresh.admin[ADMIN_KEYS.kubeconfig]);
  });

  it('points the controller manager at the apiserver on loopback', () => {
    const config = kubeconfigOf(fresh.pki[PKI_KEYS.controllerManagerKubeconfig]);
    expect(config.clusters[0]!.cluster.server).toBe('https://127.0.0.1:40001');
  });

  it('moves the kubeconfigs with the endpoint and keeps every certificate', async () => {
    const moved = { ...instance, endpoint: 'https://127.0.0.1:40009', apiServerPort: 40009 };
    const again = await ensureInstancePki(fresh, moved, start);
    expect(again.plan.reasons).toEqual([]);
    expect(kubeconfigOf(again.admin[ADMIN_KEYS.kubeconfig]).clusters[0]!.cluster.server).toBe(moved.endpoint);
    expect(again.admin[ADMIN_KEYS.clientCert]).toBe(fresh.admin[ADMIN_KEYS.clientCert]);
    expect(again.pki[PKI_KEYS.servingCert]).toBe(fresh.pki[PKI_KEYS.servingCert]);
  });
});

import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type CertificateAndKey, createCertificateAuthority, issueCertificate } from '../pki/certificates.ts';
import {
  CA_FILE,
  CA_KEY_FILE,
  ensureGatewayTls,
  planGatewayTls,
  SERVING_CERT_FILE,
  SERVING_KEY_FILE,
  type StoredGatewayTls,
} from './gateway-tls.ts';

const DAY = 24 * 3600;
const now = new Date('2030-01-01T00:00:00Z');
const serving = (ca: CertificateAndKey, overrides: Partial<Parameters<typeof issueCertificate>[1]> = {}) =>
  issueCertificate(
    ca,
    {
      commonName: 'gateway',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
      validForSeconds: 365 * DAY,
      ...overrides,
    },
    now,
  );

describe('planGatewayTls', () => {
  let ca: CertificateAndKey;
  let otherCa: CertificateAndKey;
  let good: StoredGatewayTls;
  beforeAll(async () => {
    ca = await createCertificateAuthority('test-ca', 10 * 365 * DAY, now);
    otherCa = await createCertificateAuthority('other-ca', 10 * 365 * DAY, now);
    const cert = await serving(ca);
    good = {
      caCertPem: ca.certPem,
      caKeyPem: ca.keyPem,
      servingCertPem: cert.certPem,
      servingKeyPem: cert.keyPem,
    };
  });

  test('keeps a usable CA and serving certificate', () => {
    expect(planGatewayTls(good, now)).toEqual({ action: 'keep' });
  });

  test('creates a CA when there is none, or it is unusable or close to its end', async () => {
    expect(planGatewayTls({}, now)).toEqual({ action: 'create-ca', reason: 'the CA is missing' });
    expect(planGatewayTls({ ...good, caCertPem: 'garbage' }, now)).toMatchObject({
      action: 'create-ca',
      reason: 'the CA is unparseable',
    });
    expect(planGatewayTls({ ...good, caKeyPem: otherCa.keyPem }, now)).toMatchObject({
      action: 'create-ca',
      reason: 'the CA does not match its key',
    });
    const shortCa = await createCertificateAuthority('short-ca', 10 * DAY, now);
    expect(planGatewayTls({ ...good, caCertPem: shortCa.certPem, caKeyPem: shortCa.keyPem }, now)).toEqual({
      action: 'create-ca',
      reason: 'the CA is about to expire',
    });
    expect(planGatewayTls(good, new Date(now.getTime() + 11 * 365 * DAY * 1000))).toMatchObject({
      action: 'create-ca',
      reason: 'the CA is expired',
    });
    const leaf = await serving(ca);
    expect(planGatewayTls({ ...good, caCertPem: leaf.certPem, caKeyPem: leaf.keyPem }, now)).toMatchObject({
      action: 'create-ca',
      reason: 'the CA certificate is not a CA',
    });
  });

  test('re-issues a serving certificate that is missing, foreign, expiring or misnamed', async () => {
    expect(planGatewayTls({ ...good, servingCertPem: undefined }, now)).toEqual({
      action: 'issue-serving',
      reason: 'the serving certificate is missing',
    });
    expect(planGatewayTls({ ...good, servingKeyPem: ca.keyPem }, now)).toMatchObject({
      action: 'issue-serving',
      reason: 'the serving certificate does not match its key',
    });
    const foreign = await serving(otherCa);
    expect(
      planGatewayTls({ ...good, servingCertPem: foreign.certPem, servingKeyPem: foreign.keyPem }, now),
    ).toEqual({ action: 'issue-serving', reason: 'the serving certificate is not signed by the CA' });
    expect(planGatewayTls(good, new Date(now.getTime() + 340 * DAY * 1000))).toEqual({
      action: 'issue-serving',
      reason: 'the serving certificate is about to expire',
    });
    const misnamed = await serving(ca, { dnsNames: ['example.test'] });
    expect(
      planGatewayTls({ ...good, servingCertPem: misnamed.certPem, servingKeyPem: misnamed.keyPem }, now),
    ).toEqual({ action: 'issue-serving', reason: 'the serving certificate does not name DNS:localhost' });
  });
});

describe('ensureGatewayTls', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-tls-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const read = (file: string) => readFileSync(join(dir, file), 'utf8');
  const mode = (file: string) => statSync(join(dir, file)).mode & 0o777;

  test('creates the CA and certificate once, keeps them, and renews only the certificate when it is lost', async () => {
    const first = await ensureGatewayTls(dir);
    expect(first.plan.action).toBe('create-ca');
    expect(first.certDir).toBe(dir);
    expect(first.caPem).toBe(read(CA_FILE));
    expect(mode(CA_KEY_FILE)).toBe(0o600);
    expect(mode(SERVING_KEY_FILE)).toBe(0o600);
    const cert = new X509Certificate(read(SERVING_CERT_FILE));
    expect(cert.checkIssued(new X509Certificate(first.caPem))).toBe(true);
    expect(cert.subjectAltName).toContain('IP Address:127.0.0.1');

    const files = [CA_FILE, CA_KEY_FILE, SERVING_CERT_FILE, SERVING_KEY_FILE].map(read);
    const second = await ensureGatewayTls(dir);
    expect(second.plan).toEqual({ action: 'keep' });
    expect([CA_FILE, CA_KEY_FILE, SERVING_CERT_FILE, SERVING_KEY_FILE].map(read)).toEqual(files);

    unlinkSync(join(dir, SERVING_CERT_FILE));
    const third = await ensureGatewayTls(dir);
    expect(third.plan.action).toBe('issue-serving');
    expect(third.caPem).toBe(first.caPem); // kubeconfigs that trust the CA stay valid
    expect(read(SERVING_KEY_FILE)).not.toBe(files[3]);

    writeFileSync(join(dir, CA_FILE), 'damaged');
    const fourth = await ensureGatewayTls(dir);
    expect(fourth.plan.action).toBe('create-ca');
    expect(fourth.caPem).not.toBe(first.caPem);
    expect(
      planGatewayTls(
        {
          caCertPem: read(CA_FILE),
          caKeyPem: read(CA_KEY_FILE),
          servingCertPem: read(SERVING_CERT_FILE),
          servingKeyPem: read(SERVING_KEY_FILE),
        },
        new Date(),
      ),
    ).toEqual({ action: 'keep' });
  });
});

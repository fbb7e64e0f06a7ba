import { describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueCertificate } from '../../pki/certificates.ts';
import { normalizePem, splitPemBundle } from '../../pki/planning.ts';
import {
  type CertificatePlan,
  type CertificatePolicy,
  carryOutPlan,
  planCertificates,
  planDueAt,
  trustBundle,
} from './plan.ts';
import { decodeStoredCertificates, encodeStoredCertificates } from './stored.ts';

const T0 = Date.UTC(2030, 0, 1);
const DAY = 86_400_000;
const policy: CertificatePolicy = {
  caValidSeconds: 100 * 86_400,
  servingValidSeconds: 30 * 86_400,
  renewBeforeFraction: 1 / 3,
  caPropagationSeconds: 60,
  dnsNames: ['localhost'],
  ipAddresses: ['127.0.0.1'],
};

async function material(now: number) {
  const ca = await createCertificateAuthority('ca', policy.caValidSeconds, new Date(now));
  const serving = await issueCertificate(
    ca,
    {
      commonName: 'localhost',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
      validForSeconds: policy.servingValidSeconds,
    },
    new Date(now),
  );
  return { ca, serving, caBundlePem: normalizePem(ca.certPem) };
}

describe('planCertificates', () => {
  it('creates when nothing is stored, keeps fresh material', async () => {
    expect(planCertificates(undefined, T0, policy).action).toBe('create');
    expect(planCertificates(await material(T0), T0 + DAY, policy).action).toBe('keep');
  });

  it('renews the serving certificate well before it expires', async () => {
    const stored = await material(T0);
    expect(planCertificates(stored, T0 + 19 * DAY, policy).action).toBe('keep');
    expect(planCertificates(stored, T0 + 21 * DAY, policy).action).toBe('renew-serving');
  });

  it('renews a serving certificate missing a required name', async () => {
    expect(
      planCertificates(await material(T0), T0, { ...policy, dnsNames: ['webhook.platform.svc'] }).action,
    ).toBe('renew-serving');
  });

  it('renews a serving certificate whose names only contain the required ones (localhostx is not localhost)', async () => {
    const stored = await material(T0);
    const serving = await issueCertificate(
      stored.ca,
      {
        commonName: 'localhostx',
        dnsNames: ['localhostx'],
        ipAddresses: ['127.0.0.10'],
        usage: 'server',
        validForSeconds: policy.servingValidSeconds,
      },
      new Date(T0),
    );
    expect(planCertificates({ ...stored, serving }, T0, policy).action).toBe('renew-serving');
  });

  it('stages a new CA before the old one is due, and promotes it only after the propagation delay', async () => {
    const stored = await material(T0);
    const due = T0 + 67 * DAY;
    expect(planCertificates(stored, due, policy).action).toBe('stage-ca');
    const next = await createCertificateAuthority('next', policy.caValidSeconds, new Date(due));
    const staged = {
      ...stored,
      nextCa: next,
      nextCaStagedAt: due,
      caBundlePem: trustBundle(stored.caBundlePem, due, [stored.ca.certPem, next.certPem]),
    };
    expect(splitPemBundle(staged.caBundlePem)).toHaveLength(2);
    // The old serving certificate may still be served meanwhile (it is not renewed yet as its CA is due).
    expect(planCertificates(staged, due + 30_000, policy).action).not.toBe('promote-ca');
    expect(planCertificates(staged, due + 61_000, policy).action).toBe('promote-ca');
  });

  it('drops expired CAs from the bundle, never the current one', async () => {
    const old = await createCertificateAuthority('old', 10, new Date(T0));
    const stored = await material(T0);
    const bundle = trustBundle(`${old.certPem}${stored.ca.certPem}`, T0 + DAY, [stored.ca.certPem]);
    expect(splitPemBundle(bundle)).toEqual([normalizePem(stored.ca.certPem)]);
  });
});

describe('decodeStoredCertificates', () => {
  it('reads back what was stored, and treats material that does not parse as absent', async () => {
    const stored = await material(T0);
    const data = encodeStoredCertificates(stored);
    expect(decodeStoredCertificates({ data })?.serving.certPem).toBe(stored.serving.certPem);
    const garbage = Buffer.from('not a certificate').toString('base64');
    for (const key of ['ca.crt', 'ca.key', 'tls.crt', 'tls.key']) {
      expect(decodeStoredCertificates({ data: { ...data, [key]: garbage } })).toBeUndefined();
    }
  });

  it('treats a serving certificate stored with another key as absent (it could not serve)', async () => {
    const stored = await material(T0);
    const data = encodeStoredCertificates({
      ...stored,
      serving: { ...stored.serving, keyPem: stored.ca.keyPem },
    });
    expect(decodeStoredCertificates({ data })).toBeUndefined();
  });
});

describe('planDueAt', () => {
  it('is the moment the plan stops saying keep, through renewals, a CA rotation and a bundle pruning', async () => {
    let stored = await material(T0);
    const seen = new Set<CertificatePlan['action']>();
    for (let step = 0; step < 8; step++) {
      const due = planDueAt(stored, policy);
      expect(planCertificates(stored, due - 1000, policy).action, `step ${step}: a second before`).toBe(
        'keep',
      );
      const plan = planCertificates(stored, due + 1000, policy);
      expect(plan.action, `step ${step}: a second after`).not.toBe('keep');
      seen.add(plan.action);
      stored = await carryOutPlan(plan, stored, due + 1000, policy);
    }
    expect([...seen].sort()).toEqual(['promote-ca', 'prune-bundle', 'renew-serving', 'stage-ca']);
  });
});

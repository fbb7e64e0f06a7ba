import { X509Certificate } from 'node:crypto';
import {
  type CertificateAndKey,
  createCertificateAuthority,
  issueCertificate,
} from '../../pki/certificates.ts';
import {
  caProblem,
  normalizePem,
  type ServingNames,
  servingProblem,
  splitPemBundle,
  validityWindow,
} from '../../pki/planning.ts';
import type { StoredCertificates } from './stored.ts';

/**
 * The self-managed webhook certificates' plan: what to do with the stored CA and serving
 * certificate at a moment (pure, the checks are the one certificate planner's, `pki/planning.ts`),
 * and the material each action leads to. Renewal happens well before expiry (a fraction of the
 * lifetime ahead) and never interrupts admission:
 *  - the serving certificate is re-issued from the same CA;
 *  - the CA is rotated in two steps: a new CA is first *staged* (added to the trust bundle, which
 *    is injected into the webhook configurations, while the old certificate keeps serving); only
 *    after `caPropagationSeconds` is it *promoted* (a serving certificate signed by it is swapped
 *    in). The old CA stays in the bundle until it expires, so the apiserver trusts both meanwhile.
 */

const DAY = 24 * 3600;

export interface CertificatePolicy extends ServingNames {
  readonly caValidSeconds: number;
  readonly servingValidSeconds: number;
  /** Renew once less than this fraction of a certificate's validity window remains. */
  readonly renewBeforeFraction: number;
  /** Between staging a new CA in the bundle and serving with it. */
  readonly caPropagationSeconds: number;
}

export const DEFAULT_CERTIFICATE_POLICY: Omit<CertificatePolicy, 'dnsNames' | 'ipAddresses'> = {
  caValidSeconds: 365 * DAY,
  servingValidSeconds: 30 * DAY,
  renewBeforeFraction: 1 / 3,
  caPropagationSeconds: 60,
};

export type CertificatePlan =
  | { readonly action: 'keep' }
  | { readonly action: 'create' }
  | { readonly action: 'renew-serving' }
  | { readonly action: 'stage-ca' }
  | { readonly action: 'promote-ca' }
  | { readonly action: 'prune-bundle' };

/** CAs of the bundle still valid at `now`, plus the ones given (current and next CA), each once. */
export function trustBundle(bundle: string, now: number, keep: readonly string[]): string {
  const wanted = [...keep, ...splitPemBundle(bundle).filter((pem) => validityWindow(pem).to > now)];
  return [...new Set(wanted.map(normalizePem))].join('');
}

/** What to do with the stored material at `now`; pure. */
export function planCertificates(
  stored: StoredCertificates | undefined,
  now: number,
  policy: CertificatePolicy,
): CertificatePlan {
  if (!stored) return { action: 'create' };
  const ca = new X509Certificate(stored.ca.certPem);
  const renewBefore = { fraction: policy.renewBeforeFraction };
  if (stored.nextCa) {
    const stagedFor = now - (stored.nextCaStagedAt ?? 0);
    if (stagedFor >= policy.caPropagationSeconds * 1000 || validityWindow(ca).to <= now) {
      return { action: 'promote-ca' };
    }
  } else if (caProblem(ca, now, renewBefore)) {
    return { action: 'stage-ca' };
  }
  if (servingProblem(stored.serving, ca, now, { renewBefore, names: policy })) {
    return { action: 'renew-serving' };
  }
  const bundle = trustBundle(stored.caBundlePem, now, [
    stored.ca.certPem,
    ...(stored.nextCa ? [stored.nextCa.certPem] : []),
  ]);
  if (bundle !== stored.caBundlePem) return { action: 'prune-bundle' };
  return { action: 'keep' };
}

/**
 * When {@link planCertificates} stops answering `keep` for `stored` if the Secret does not change:
 * the serving certificate's or the CA's renewal falling due, a staged CA's promotion, a CA of the
 * bundle expiring (ms since the epoch). The rotation reconciles again then, and on every change
 * of the Secret; nothing else needs a look.
 */
export function planDueAt(stored: StoredCertificates, policy: CertificatePolicy): number {
  const renewalDueAt = (pem: string) => {
    const { from, to } = validityWindow(pem);
    return to - policy.renewBeforeFraction * (to - from);
  };
  const caDueAt = stored.nextCa
    ? Math.min(
        (stored.nextCaStagedAt ?? 0) + policy.caPropagationSeconds * 1000,
        validityWindow(stored.ca.certPem).to,
      )
    : renewalDueAt(stored.ca.certPem);
  const bundleExpiries = splitPemBundle(stored.caBundlePem).map((pem) => validityWindow(pem).to);
  return Math.min(renewalDueAt(stored.serving.certPem), caDueAt, ...bundleExpiries);
}

/** The material `plan` leads to from `stored` at `now` (new keys and certificates where it says so). */
export async function carryOutPlan(
  plan: CertificatePlan,
  stored: StoredCertificates | undefined,
  now: number,
  policy: CertificatePolicy,
): Promise<StoredCertificates> {
  const issue = (ca: CertificateAndKey) =>
    issueCertificate(
      ca,
      {
        commonName: policy.dnsNames[0] ?? policy.ipAddresses[0] ?? 'platform-webhook',
        dnsNames: [...policy.dnsNames],
        ipAddresses: [...policy.ipAddresses],
        usage: 'server',
        validForSeconds: policy.servingValidSeconds,
      },
      new Date(now),
    );
  const newCa = () =>
    createCertificateAuthority(`platform-webhook-ca-${now}`, policy.caValidSeconds, new Date(now));
  if (plan.action === 'create' || !stored) {
    const ca = await newCa();
    return { ca, serving: await issue(ca), caBundlePem: normalizePem(ca.certPem) };
  }
  switch (plan.action) {
    case 'stage-ca': {
      const nextCa = await newCa();
      return {
        ...stored,
        nextCa,
        nextCaStagedAt: now,
        caBundlePem: trustBundle(stored.caBundlePem, now, [stored.ca.certPem, nextCa.certPem]),
      };
    }
    case 'promote-ca': {
      const ca = stored.nextCa!;
      return {
        ca,
        serving: await issue(ca),
        caBundlePem: trustBundle(stored.caBundlePem, now, [ca.certPem, stored.ca.certPem]),
      };
    }
    case 'renew-serving':
      return { ...stored, serving: await issue(stored.ca) };
    default:
      return {
        ...stored,
        caBundlePem: trustBundle(stored.caBundlePem, now, [
          stored.ca.certPem,
          ...(stored.nextCa ? [stored.nextCa.certPem] : []),
        ]),
      };
  }
}

import { createPrivateKey, X509Certificate } from 'node:crypto';

/**
 * The certificate planner: whether a CA and a serving certificate it issued can stay at a given
 * moment, or why not. Pure (the time is an argument). Both holders of a CA and a serving
 * certificate decide with it: the admission webhook's self-managed certificates (a Secret, with a
 * staged CA rotation) and the dev gateway's (files, CA replaced at once); each turns a problem
 * into its own action.
 */

/** When renewal is due: a fraction of the validity window, or a fixed time, before the end. */
export type RenewBefore = { readonly fraction: number } | { readonly seconds: number };

/** The names a serving certificate must carry (subject alternative names). */
export interface ServingNames {
  readonly dnsNames: readonly string[];
  readonly ipAddresses: readonly string[];
}

/** One spelling per certificate (LF line ends, one trailing newline), so bundles compare by text. */
export function normalizePem(pem: string): string {
  return `${pem.replaceAll('\r\n', '\n').trimEnd()}\n`;
}

/** Splits a PEM bundle into its certificates (normalized). */
export function splitPemBundle(bundle: string): string[] {
  return (
    bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g)?.map(normalizePem) ?? []
  );
}

/** The validity window of a certificate, in ms since the epoch. */
export function validityWindow(cert: X509Certificate | string): { from: number; to: number } {
  const parsed = typeof cert === 'string' ? new X509Certificate(cert) : cert;
  return { from: Date.parse(parsed.validFrom), to: Date.parse(parsed.validTo) };
}

/** The certificate when it parses and its key matches, else why not (a phrase after "the certificate"). */
export function certificateWithKey(
  certPem: string | undefined,
  keyPem: string | undefined,
): X509Certificate | string {
  if (certPem === undefined || keyPem === undefined) return 'is missing';
  try {
    const cert = new X509Certificate(certPem);
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return 'does not match its key';
    return cert;
  } catch {
    return 'is unparseable';
  }
}

/** Why `cert` must be replaced at `now` (a phrase after "is"), or undefined while it may stay. */
function lifetimeProblem(cert: X509Certificate, now: number, renewBefore: RenewBefore): string | undefined {
  const { from, to } = validityWindow(cert);
  if (now < from) return 'not valid yet';
  if (now >= to) return 'expired';
  const ahead = 'fraction' in renewBefore ? renewBefore.fraction * (to - from) : renewBefore.seconds * 1000;
  if (to - now < ahead) return 'about to expire';
  return undefined;
}

/** Why a CA must be replaced at `now` (a phrase after "the CA"), or undefined while it may stay. */
export function caProblem(ca: X509Certificate, now: number, renewBefore: RenewBefore): string | undefined {
  if (!ca.ca) return 'certificate is not a CA';
  const lifetime = lifetimeProblem(ca, now, renewBefore);
  return lifetime ? `is ${lifetime}` : undefined;
}

/**
 * Why a serving certificate must be re-issued by `ca` at `now` (a phrase after "the serving
 * certificate"), or undefined while it may keep serving: it must match its key, be signed by the
 * CA, be within its lifetime, and name every one of `names` exactly.
 */
export function servingProblem(
  serving: { readonly certPem: string | undefined; readonly keyPem: string | undefined },
  ca: X509Certificate,
  now: number,
  policy: { readonly renewBefore: RenewBefore; readonly names: ServingNames },
): string | undefined {
  const cert = certificateWithKey(serving.certPem, serving.keyPem);
  if (typeof cert === 'string') return cert;
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return 'is not signed by the CA';
  const lifetime = lifetimeProblem(cert, now, policy.renewBefore);
  if (lifetime) return `is ${lifetime}`;
  const carried = (cert.subjectAltName ?? '').split(', ');
  const missing = [
    ...policy.names.dnsNames.map((name) => `DNS:${name}`),
    ...policy.names.ipAddresses.map((ip) => `IP Address:${ip}`),
  ].filter((name) => !carried.includes(name));
  return missing.length > 0 ? `does not name ${missing.join(', ')}` : undefined;
}

import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CertificateAndKey, createCertificateAuthority, issueCertificate } from '../pki/certificates.ts';
import { caProblem, certificateWithKey, servingProblem } from '../pki/planning.ts';

/**
 * HTTPS for the management gateway of `platform dev`: kubectl sends a bearer token only over TLS,
 * so the gateway serves with a certificate of a local CA, and admin.kubeconfig trusts that CA.
 *
 * Everything lives in one directory (`<stateDir>/gateway/`), which is also the gateway's
 * `--gateway-cert-dir`:
 *
 *   ca.crt, ca.key    the local CA (10 years); its certificate goes into admin.kubeconfig
 *   tls.crt, tls.key  the serving certificate for 127.0.0.1 and localhost (1 year)
 *
 * A restart keeps both as long as they are usable, so a kubeconfig written earlier stays valid.
 * The serving certificate is re-issued by the same CA when it is missing, unparseable, not
 * matching its key, not signed by the CA, missing a name, or within {@link SERVING_RENEW_BEFORE_SECONDS}
 * of its end; clients notice nothing. The CA is only replaced when it is itself unusable or close
 * to its end, and then admin.kubeconfig is rewritten with the new one.
 */

export const CA_FILE = 'ca.crt';
export const CA_KEY_FILE = 'ca.key';
export const SERVING_CERT_FILE = 'tls.crt';
export const SERVING_KEY_FILE = 'tls.key';

/** The names kubectl and the platform's own probes use for the gateway. */
export const GATEWAY_SERVING_NAMES = { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] } as const;

const DAY_SECONDS = 24 * 3600;
export const CA_VALIDITY_SECONDS = 10 * 365 * DAY_SECONDS;
export const SERVING_VALIDITY_SECONDS = 365 * DAY_SECONDS;
/** A CA this close to its end is replaced (which invalidates kubeconfigs that trust it). */
export const CA_RENEW_BEFORE_SECONDS = 90 * DAY_SECONDS;
/** A serving certificate this close to its end is re-issued (invisible to clients). */
export const SERVING_RENEW_BEFORE_SECONDS = 30 * DAY_SECONDS;

/** The PEM texts found on disk; a missing file is undefined. */
export interface StoredGatewayTls {
  readonly caCertPem?: string | undefined;
  readonly caKeyPem?: string | undefined;
  readonly servingCertPem?: string | undefined;
  readonly servingKeyPem?: string | undefined;
}

export type GatewayTlsPlan =
  | { readonly action: 'keep' }
  | { readonly action: 'issue-serving'; readonly reason: string }
  | { readonly action: 'create-ca'; readonly reason: string };

/** What to do with the stored files at `now`; pure (the checks are the one certificate planner's). */
export function planGatewayTls(stored: StoredGatewayTls, now: Date): GatewayTlsPlan {
  const ca = certificateWithKey(stored.caCertPem, stored.caKeyPem);
  if (typeof ca === 'string') return { action: 'create-ca', reason: `the CA ${ca}` };
  const caTrouble = caProblem(ca, now.getTime(), { seconds: CA_RENEW_BEFORE_SECONDS });
  if (caTrouble) return { action: 'create-ca', reason: `the CA ${caTrouble}` };
  const serving = servingProblem(
    { certPem: stored.servingCertPem, keyPem: stored.servingKeyPem },
    ca,
    now.getTime(),
    { renewBefore: { seconds: SERVING_RENEW_BEFORE_SECONDS }, names: GATEWAY_SERVING_NAMES },
  );
  if (serving) return { action: 'issue-serving', reason: `the serving certificate ${serving}` };
  return { action: 'keep' };
}

export interface GatewayTls {
  /** The directory to pass as the gateway's cert dir (`tls.crt`, `tls.key`). */
  readonly certDir: string;
  /** The CA clients must trust (PEM). */
  readonly caPem: string;
  /** What was done, for progress messages. */
  readonly plan: GatewayTlsPlan;
}

const readIfPresent = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8') : undefined);

/** Writes through a temporary file and a rename, so a crash never leaves half a PEM behind. */
function writeAtomically(path: string, content: string, mode: number): void {
  const temporary = `${path}.tmp`;
  writeFileSync(temporary, content, { mode });
  chmodSync(temporary, mode); // `mode` only applies when the file is created
  renameSync(temporary, path);
}

/** Loads the gateway's CA and serving certificate from `dir`, creating or renewing what is unusable. */
export async function ensureGatewayTls(dir: string, now: Date = new Date()): Promise<GatewayTls> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stored: StoredGatewayTls = {
    caCertPem: readIfPresent(join(dir, CA_FILE)),
    caKeyPem: readIfPresent(join(dir, CA_KEY_FILE)),
    servingCertPem: readIfPresent(join(dir, SERVING_CERT_FILE)),
    servingKeyPem: readIfPresent(join(dir, SERVING_KEY_FILE)),
  };
  const plan = planGatewayTls(stored, now);
  let ca: CertificateAndKey = { certPem: stored.caCertPem ?? '', keyPem: stored.caKeyPem ?? '' };
  if (plan.action === 'create-ca') {
    ca = await createCertificateAuthority('platform-dev-gateway-ca', CA_VALIDITY_SECONDS, now);
    writeAtomically(join(dir, CA_KEY_FILE), ca.keyPem, 0o600);
    writeAtomically(join(dir, CA_FILE), ca.certPem, 0o644);
  }
  if (plan.action !== 'keep') {
    const serving = await issueCertificate(
      ca,
      {
        commonName: 'platform-dev-gateway',
        dnsNames: [...GATEWAY_SERVING_NAMES.dnsNames],
        ipAddresses: [...GATEWAY_SERVING_NAMES.ipAddresses],
        usage: 'server',
        validForSeconds: SERVING_VALIDITY_SECONDS,
      },
      now,
    );
    writeAtomically(join(dir, SERVING_KEY_FILE), serving.keyPem, 0o600);
    writeAtomically(join(dir, SERVING_CERT_FILE), serving.certPem, 0o644);
  }
  return { certDir: dir, caPem: ca.certPem, plan };
}

import { createPrivateKey, X509Certificate } from 'node:crypto';
import { type FSWatcher, watch as watchDirectory } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { ApiException } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type CertificateAndKey, createCertificateAuthority, issueCertificate } from '../pki/certificates.ts';
import { type Clock, systemClock, type Timer } from '../runtime/clock.ts';
import { ownValue } from '../runtime/json.ts';
import type { KubeApi } from '../runtime/kube-client.ts';
import type { CertificateSource, ServingMaterial } from './server.ts';

/**
 * Serving certificates of the admission webhook.
 *
 * Self-managed (default): a CA and a serving certificate live in one Secret of the platform
 * namespace, shared by every replica. Renewal happens well before expiry (a fraction of the
 * lifetime ahead) and never interrupts admission:
 *  - the serving certificate is re-issued from the same CA and swapped in place;
 *  - the CA is rotated in two steps: a new CA is first *staged* (added to the trust bundle, which
 *    is injected into the webhook configurations, while the old certificate keeps serving); only
 *    after `caPropagationSeconds` is it *promoted* (a serving certificate signed by it is swapped
 *    in). The old CA stays in the bundle until it expires, so the apiserver trusts both meanwhile.
 * Writes use the Secret's resourceVersion, so concurrent replicas converge on one winner.
 *
 * External (cert-manager style): `tls.crt`, `tls.key`, `ca.crt` mounted from a directory,
 * reloaded when they change.
 */

export const SERVING_SECRET_NAME = 'platform-webhook-serving';

const DAY = 24 * 3600;

export interface CertificatePolicy {
  readonly caValidSeconds: number;
  readonly servingValidSeconds: number;
  /** Renew once less than this fraction of a certificate's validity window remains. */
  readonly renewBeforeFraction: number;
  /** Between staging a new CA in the bundle and serving with it. */
  readonly caPropagationSeconds: number;
  readonly dnsNames: readonly string[];
  readonly ipAddresses: readonly string[];
}

export const DEFAULT_CERTIFICATE_POLICY: Omit<CertificatePolicy, 'dnsNames' | 'ipAddresses'> = {
  caValidSeconds: 365 * DAY,
  servingValidSeconds: 30 * DAY,
  renewBeforeFraction: 1 / 3,
  caPropagationSeconds: 60,
};

/** The content of the serving Secret (`data` decoded). */
export interface StoredCertificates {
  readonly ca: CertificateAndKey;
  readonly serving: CertificateAndKey;
  /** Every CA the apiserver must trust, PEM concatenated. */
  readonly caBundlePem: string;
  /** A CA staged for promotion, and since when (ms). */
  readonly nextCa?: CertificateAndKey;
  readonly nextCaStagedAt?: number;
}

const KEYS = {
  caCert: 'ca.crt',
  caKey: 'ca.key',
  cert: 'tls.crt',
  key: 'tls.key',
  bundle: 'ca-bundle.crt',
  nextCaCert: 'next-ca.crt',
  nextCaKey: 'next-ca.key',
  nextCaStagedAt: 'next-ca-staged-at',
} as const;

export type CertificatePlan =
  | { readonly action: 'keep' }
  | { readonly action: 'create' }
  | { readonly action: 'renew-serving' }
  | { readonly action: 'stage-ca' }
  | { readonly action: 'promote-ca' }
  | { readonly action: 'prune-bundle' };

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

function window(pem: string): { from: number; to: number } {
  const cert = new X509Certificate(pem);
  return { from: Date.parse(cert.validFrom), to: Date.parse(cert.validTo) };
}

/** Whether less than `fraction` of the certificate's validity window remains at `now`. */
export function renewalDue(pem: string, now: number, fraction: number): boolean {
  const { from, to } = window(pem);
  return to - now < fraction * (to - from);
}

function coversNames(pem: string, policy: CertificatePolicy): boolean {
  const cert = new X509Certificate(pem);
  const san = cert.subjectAltName ?? '';
  return (
    policy.dnsNames.every((name) => san.includes(`DNS:${name}`)) &&
    policy.ipAddresses.every((ip) => san.includes(`IP Address:${ip}`))
  );
}

function signedBy(pem: string, caPem: string): boolean {
  return new X509Certificate(pem).verify(new X509Certificate(caPem).publicKey);
}

/** CAs of the bundle still valid at `now`, plus the ones given (current and next CA), each once. */
export function trustBundle(bundle: string, now: number, keep: readonly string[]): string {
  const wanted = [...keep, ...splitPemBundle(bundle).filter((pem) => window(pem).to > now)];
  return [...new Set(wanted.map(normalizePem))].join('');
}

/** What to do with the stored material at `now`; pure. */
export function planCertificates(
  stored: StoredCertificates | undefined,
  now: number,
  policy: CertificatePolicy,
): CertificatePlan {
  if (!stored) return { action: 'create' };
  if (stored.nextCa) {
    const stagedFor = now - (stored.nextCaStagedAt ?? 0);
    if (stagedFor >= policy.caPropagationSeconds * 1000 || window(stored.ca.certPem).to <= now) {
      return { action: 'promote-ca' };
    }
  } else if (renewalDue(stored.ca.certPem, now, policy.renewBeforeFraction)) {
    return { action: 'stage-ca' };
  }
  if (
    renewalDue(stored.serving.certPem, now, policy.renewBeforeFraction) ||
    !coversNames(stored.serving.certPem, policy) ||
    !signedBy(stored.serving.certPem, stored.ca.certPem)
  ) {
    return { action: 'renew-serving' };
  }
  const bundle = trustBundle(stored.caBundlePem, now, [
    stored.ca.certPem,
    ...(stored.nextCa ? [stored.nextCa.certPem] : []),
  ]);
  if (bundle !== stored.caBundlePem) return { action: 'prune-bundle' };
  return { action: 'keep' };
}

interface SecretObject {
  metadata?: { resourceVersion?: string };
  data?: Record<string, string>;
}

function parses(certPem: string, keyPem: string): boolean {
  try {
    new X509Certificate(certPem);
    createPrivateKey(keyPem);
    return true;
  } catch {
    return false;
  }
}

export function decodeStoredCertificates(secret: SecretObject): StoredCertificates | undefined {
  const data = secret.data ?? {};
  const text = (key: string) => {
    const value = ownValue(data, key);
    return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
  };
  const caCert = text(KEYS.caCert);
  const caKey = text(KEYS.caKey);
  const cert = text(KEYS.cert);
  const key = text(KEYS.key);
  if (!caCert || !caKey || !cert || !key) return undefined;
  // Material that does not parse is as good as none: it is replaced, never served or crashed on.
  if (!parses(caCert, caKey) || !parses(cert, key)) return undefined;
  let nextCert = text(KEYS.nextCaCert);
  let nextKey = text(KEYS.nextCaKey);
  if (nextCert && nextKey && !parses(nextCert, nextKey)) {
    nextCert = undefined;
    nextKey = undefined;
  }
  const stagedAt = Number(text(KEYS.nextCaStagedAt));
  return {
    ca: { certPem: caCert, keyPem: caKey },
    serving: { certPem: cert, keyPem: key },
    caBundlePem: text(KEYS.bundle) ?? caCert,
    ...(nextCert && nextKey
      ? { nextCa: { certPem: nextCert, keyPem: nextKey }, nextCaStagedAt: stagedAt || 0 }
      : {}),
  };
}

export function encodeStoredCertificates(stored: StoredCertificates): Record<string, string> {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  return {
    [KEYS.caCert]: b64(stored.ca.certPem),
    [KEYS.caKey]: b64(stored.ca.keyPem),
    [KEYS.cert]: b64(stored.serving.certPem),
    [KEYS.key]: b64(stored.serving.keyPem),
    [KEYS.bundle]: b64(stored.caBundlePem),
    ...(stored.nextCa
      ? {
          [KEYS.nextCaCert]: b64(stored.nextCa.certPem),
          [KEYS.nextCaKey]: b64(stored.nextCa.keyPem),
          [KEYS.nextCaStagedAt]: b64(String(stored.nextCaStagedAt ?? 0)),
        }
      : {}),
  };
}

const toMaterial = (stored: StoredCertificates): ServingMaterial => ({
  certPem: stored.serving.certPem,
  keyPem: stored.serving.keyPem,
  caBundlePem: stored.caBundlePem,
});

/** The certificate source has not loaded any material yet (call `start()` first). */
export class CertificatesNotLoaded extends Error {
  override readonly name = 'CertificatesNotLoaded';
}

/** The material and subscribers both certificate sources keep; `publish` hands new material out. */
abstract class PublishedMaterial {
  protected material: ServingMaterial | undefined;
  private readonly listeners = new Set<(material: ServingMaterial) => void>();

  current(): ServingMaterial {
    if (!this.material) throw new CertificatesNotLoaded('call start() before serving');
    return this.material;
  }

  subscribe(listener: (material: ServingMaterial) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  protected publish(material: ServingMaterial, notify: boolean): void {
    this.material = material;
    if (notify) for (const listener of this.listeners) listener(material);
  }
}

export interface SelfManagedCertificatesOptions {
  readonly api: KubeApi;
  readonly namespace: string;
  readonly secretName?: string;
  readonly policy: CertificatePolicy;
  /** Injects a changed CA bundle into the webhook configurations; called before the bundle is relied on. */
  readonly onCaBundle: (caBundlePem: string) => Promise<void>;
  readonly clock?: Clock;
  /** How often to look at the Secret (renewal, other replicas' rotations). */
  readonly checkIntervalSeconds?: number;
  readonly logger?: Logger;
}

/** A Secret write lost against another replica's (409); the next reconcile reads theirs. */
class LostRace extends Error {
  override readonly name = 'LostRace';
}

export class SelfManagedCertificates extends PublishedMaterial implements CertificateSource {
  private injectedBundle: string | undefined;
  private timer: Timer | undefined;
  private stopped = false;
  private readonly clock: Clock;
  private readonly secretName: string;

  constructor(private readonly options: SelfManagedCertificatesOptions) {
    super();
    this.clock = options.clock ?? systemClock;
    this.secretName = options.secretName ?? SERVING_SECRET_NAME;
  }

  /** Loads or creates the material, then re-checks periodically until {@link stop}. */
  async start(): Promise<void> {
    await this.reconcile();
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.clock.setTimer((this.options.checkIntervalSeconds ?? 60) * 1000, () => {
      this.reconcile()
        .catch((err: unknown) =>
          this.options.logger?.error(
            { err: err instanceof Error ? err.name : 'unknown' },
            'webhook certificate check failed',
          ),
        )
        .finally(() => this.schedule());
    });
  }

  /**
   * One pass: read the Secret, act on {@link planCertificates} until it says `keep`, inject the
   * bundle when it changed, and swap the serving material when it changed. Safe to call at any time
   * from any replica.
   */
  async reconcile(): Promise<CertificatePlan['action'][]> {
    const actions: CertificatePlan['action'][] = [];
    for (let pass = 0; pass < 6; pass++) {
      const secret = await this.read();
      const stored = secret ? decodeStoredCertificates(secret) : undefined;
      const now = this.clock.now();
      const plan = planCertificates(stored, now, this.options.policy);
      if (plan.action === 'keep' && stored) {
        await this.adopt(stored);
        return actions;
      }
      actions.push(plan.action);
      try {
        const next = await this.next(plan, stored, now);
        // The apiserver must trust a CA before anything is served with it.
        await this.inject(next.caBundlePem);
        await this.write(secret, next);
      } catch (err) {
        if (!(err instanceof LostRace)) throw err;
      }
    }
    throw new Error('webhook certificates did not settle; another writer keeps changing the Secret');
  }

  private async next(
    plan: CertificatePlan,
    stored: StoredCertificates | undefined,
    now: number,
  ): Promise<StoredCertificates> {
    const { policy } = this.options;
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

  private async adopt(stored: StoredCertificates): Promise<void> {
    await this.inject(stored.caBundlePem);
    const material = toMaterial(stored);
    const changed =
      !this.material ||
      this.material.certPem !== material.certPem ||
      this.material.caBundlePem !== material.caBundlePem;
    this.publish(material, changed);
  }

  private async inject(bundle: string): Promise<void> {
    if (bundle === this.injectedBundle) return;
    await this.options.onCaBundle(bundle);
    this.injectedBundle = bundle;
  }

  private path(name?: string): string {
    return `/api/v1/namespaces/${encodeURIComponent(this.options.namespace)}/secrets${name ? `/${encodeURIComponent(name)}` : ''}`;
  }

  private async read(): Promise<SecretObject | undefined> {
    try {
      return await this.options.api.request<SecretObject>({
        method: 'GET',
        path: this.path(this.secretName),
      });
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  }

  private async write(existing: SecretObject | undefined, stored: StoredCertificates): Promise<void> {
    const body = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: this.secretName,
        namespace: this.options.namespace,
        labels: {
          'app.kubernetes.io/part-of': 'platform',
          'app.kubernetes.io/component': 'admission-webhook',
        },
        ...(existing?.metadata?.resourceVersion
          ? { resourceVersion: existing.metadata.resourceVersion }
          : {}),
      },
      type: 'Opaque',
      data: encodeStoredCertificates(stored),
    };
    try {
      if (existing) await this.options.api.request({ method: 'PUT', path: this.path(this.secretName), body });
      else await this.options.api.request({ method: 'POST', path: this.path(), body });
    } catch (err) {
      if (err instanceof ApiException && err.code === 409) throw new LostRace();
      throw err;
    }
  }
}

export interface MountedCertificatesOptions {
  /** Directory with `tls.crt`, `tls.key` and `ca.crt` (a mounted cert-manager Secret). */
  readonly directory: string;
  readonly clock?: Clock;
  /** Polling interval besides filesystem events (kubelet swaps files by symlink, which some watchers miss). */
  readonly pollSeconds?: number;
  readonly logger?: Logger;
}

/** The mounted files do not form a usable certificate (missing, or key and certificate do not match). */
export class InvalidMountedCertificate extends Error {
  override readonly name = 'InvalidMountedCertificate';
}

/** Certificates provided from outside (cert-manager), reloaded when the files change. */
export class MountedCertificates extends PublishedMaterial implements CertificateSource {
  private watcher: FSWatcher | undefined;
  private timer: Timer | undefined;
  private stopped = false;
  private readonly clock: Clock;

  constructor(private readonly options: MountedCertificatesOptions) {
    super();
    this.clock = options.clock ?? systemClock;
  }

  /** Loads the files (throws {@link InvalidMountedCertificate} when unusable) and starts watching. */
  async start(): Promise<void> {
    await this.reload();
    try {
      this.watcher = watchDirectory(this.options.directory, () => {
        void this.reloadLogged();
      });
    } catch {
      // Polling alone still picks up changes.
    }
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.watcher?.close();
    this.timer?.cancel();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.clock.setTimer((this.options.pollSeconds ?? 10) * 1000, () => {
      void this.reloadLogged().finally(() => this.schedule());
    });
  }

  private async reloadLogged(): Promise<void> {
    try {
      await this.reload();
    } catch (err) {
      // Half-written files during a swap are normal; keep serving the previous material.
      this.options.logger?.warn(
        { err: err instanceof Error ? err.message : 'unknown' },
        'mounted webhook certificate not reloaded',
      );
    }
  }

  /** Reads the files; emits when they changed and form a valid pair. */
  async reload(): Promise<boolean> {
    const read = (name: string) => readFile(join(this.options.directory, name), 'utf8');
    let material: ServingMaterial;
    try {
      const [certPem, keyPem, caBundlePem] = await Promise.all([
        read('tls.crt'),
        read('tls.key'),
        read('ca.crt'),
      ]);
      material = { certPem, keyPem, caBundlePem };
    } catch (err) {
      throw new InvalidMountedCertificate(
        `cannot read tls.crt, tls.key and ca.crt: ${err instanceof Error ? err.message : err}`,
      );
    }
    if (
      this.material &&
      this.material.certPem === material.certPem &&
      this.material.keyPem === material.keyPem &&
      this.material.caBundlePem === material.caBundlePem
    ) {
      return false;
    }
    try {
      createSecureContext({ cert: material.certPem, key: material.keyPem });
    } catch {
      throw new InvalidMountedCertificate('tls.key does not match tls.crt (or either is not PEM)');
    }
    this.publish(material, true);
    return true;
  }
}

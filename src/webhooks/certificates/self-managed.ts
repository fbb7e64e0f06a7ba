import { ApiException } from '@kubernetes/client-node';
import { splitPemBundle } from '../../pki/planning.ts';
import { type Clock, systemClock } from '../../runtime/clock.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import type { CertificateSource, ServingMaterial } from '../server.ts';
import {
  type CertificatePlan,
  type CertificatePolicy,
  carryOutPlan,
  planCertificates,
  planDueAt,
  trustBundle,
} from './plan.ts';
import { PublishedMaterial } from './published.ts';
import {
  decodeStoredCertificates,
  encodeStoredCertificates,
  SERVING_SECRET_NAME,
  type SecretObject,
  type StoredCertificates,
} from './stored.ts';

/**
 * Self-managed serving certificates of the admission webhook: a CA and a serving certificate in
 * one Secret of the platform namespace (`stored.ts`), shared by every replica, renewed as
 * `plan.ts` says. Writes use the Secret's resourceVersion, so concurrent replicas converge on one
 * winner. {@link SelfManagedCertificates.reconcile} is one pass; `rotation.ts` runs it as a
 * controller of the Manager.
 */

const toMaterial = (stored: StoredCertificates): ServingMaterial => ({
  certPem: stored.serving.certPem,
  keyPem: stored.serving.keyPem,
  caBundlePem: stored.caBundlePem,
});

export interface SelfManagedCertificatesOptions {
  readonly api: KubeApi;
  readonly namespace: string;
  readonly secretName?: string;
  readonly policy: CertificatePolicy;
  /** Injects a changed CA bundle into the webhook configurations; called before the bundle is relied on. */
  readonly onCaBundle: (caBundlePem: string) => Promise<void>;
  readonly clock?: Clock;
}

/** A Secret write lost against another replica's (409); the next reconcile reads theirs. */
class LostRace extends Error {
  override readonly name = 'LostRace';
}

export class SelfManagedCertificates extends PublishedMaterial implements CertificateSource {
  private injectedBundle: string | undefined;
  private adopted: StoredCertificates | undefined;
  private readonly clock: Clock;
  private readonly secretName: string;

  constructor(private readonly options: SelfManagedCertificatesOptions) {
    super();
    this.clock = options.clock ?? systemClock;
    this.secretName = options.secretName ?? SERVING_SECRET_NAME;
  }

  /** The serving Secret, `namespace/name`: the one key the rotation controller reconciles. */
  get secretKey(): string {
    return `${this.options.namespace}/${this.secretName}`;
  }

  /** The serving Secret's name (the rotation watches it). */
  get name(): string {
    return this.secretName;
  }

  get namespace(): string {
    return this.options.namespace;
  }

  /** How long until the material served now needs a look ({@link planDueAt}); 0 before any. */
  dueInMs(): number {
    if (!this.adopted) return 0;
    return Math.max(0, planDueAt(this.adopted, this.options.policy) - this.clock.now());
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
        const next = await carryOutPlan(plan, stored, now, this.options.policy);
        // The apiserver must trust a CA before anything is served with it, and go on trusting the
        // one of what is served now until the new material is (a Secret too broken to read is
        // made anew, with a new CA, while the old certificate is still served).
        await this.inject(this.whileServing(next.caBundlePem, now));
        await this.write(secret, next);
      } catch (err) {
        if (!(err instanceof LostRace)) throw err;
      }
    }
    throw new Error('webhook certificates did not settle; another writer keeps changing the Secret');
  }

  private async adopt(stored: StoredCertificates): Promise<void> {
    const material = toMaterial(stored);
    const changed =
      !this.material ||
      this.material.certPem !== material.certPem ||
      this.material.caBundlePem !== material.caBundlePem;
    // Trusted before served (with what is served until the swap), then narrowed to the Secret's.
    await this.inject(this.whileServing(stored.caBundlePem, this.clock.now()));
    this.adopted = stored;
    this.publish(material, changed);
    await this.inject(stored.caBundlePem);
  }

  /** `bundle` plus the still-valid CAs of the bundle of what is served now (none before serving). */
  private whileServing(bundle: string, now: number): string {
    return this.material ? trustBundle(this.material.caBundlePem, now, splitPemBundle(bundle)) : bundle;
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

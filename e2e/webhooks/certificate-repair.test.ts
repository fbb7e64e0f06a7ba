import { X509Certificate } from 'node:crypto';
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { splitPemBundle } from '../../src/pki/planning.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { DEFAULT_CERTIFICATE_POLICY } from '../../src/webhooks/certificates/plan.ts';
import { SelfManagedCertificates } from '../../src/webhooks/certificates/self-managed.ts';
import { hostKubeConfig, useNamespace } from '../support/cluster.ts';

/**
 * A running webhook whose serving Secret is broken by an edit (the CA's certificate in the serving
 * certificate's place: unreadable, so the material is made anew with a new CA) must never leave
 * the apiserver trusting a bundle without the CA of the certificate being served: every step of
 * the repair is recorded, the bundles injected into the webhook configurations and the material
 * served, in order.
 */
describe('repairing the serving Secret of a running webhook', () => {
  const namespace = useNamespace('webhook-repair');

  it('keeps the CA of what is served in the injected bundle at every step, and ends on the Secret’s bundle', async () => {
    const steps: Array<{ injected: string } | { served: string }> = [];
    const certificates = new SelfManagedCertificates({
      api: new KubeClient(hostKubeConfig()),
      namespace: namespace(),
      secretName: 'webhook-serving',
      policy: { ...DEFAULT_CERTIFICATE_POLICY, dnsNames: ['webhook.example'], ipAddresses: ['127.0.0.1'] },
      onCaBundle: async (bundle) => {
        steps.push({ injected: bundle });
      },
    });
    certificates.subscribe((material) => steps.push({ served: material.certPem }));
    await certificates.reconcile();
    const first = certificates.current();

    const core = hostKubeConfig().makeApiClient(CoreV1Api);
    const secret = await core.readNamespacedSecret({ name: 'webhook-serving', namespace: namespace() });
    const data = secret.data ?? {};
    await core.replaceNamespacedSecret({
      name: 'webhook-serving',
      namespace: namespace(),
      body: { ...secret, data: { ...data, 'tls.crt': data['ca.crt'] ?? '' } },
    });
    steps.length = 0;
    const actions = await certificates.reconcile();
    expect(actions).toEqual(['create']);
    const repaired = certificates.current();
    expect(repaired.certPem).not.toBe(first.certPem);

    // Replay: what the apiserver trusts and what is served, step by step.
    const issuerIn = (bundle: string, certPem: string) =>
      splitPemBundle(bundle).some((ca) => new X509Certificate(certPem).checkIssued(new X509Certificate(ca)));
    let trusted = first.caBundlePem;
    let served = first.certPem;
    for (const step of steps) {
      if ('injected' in step) trusted = step.injected;
      else served = step.served;
      expect(issuerIn(trusted, served), JSON.stringify(Object.keys(step))).toBe(true);
    }
    expect(steps.some((step) => 'served' in step)).toBe(true);
    expect(trusted).toBe(repaired.caBundlePem);
  });
});

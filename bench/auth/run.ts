/**
 * Access key authentication and expiry. In one run, against one apiserver of its own:
 *
 * 1. Authentication cost: K keys (default 10,000) exist and are in the authenticator's informer
 *    cache; each iteration authenticates one of them through `AccessKeyAuthenticator.authenticate`
 *    (parse, index lookup, HMAC, constant-time compare, expiry, identity, activity record). The
 *    baseline is a bare HMAC-SHA-256 of the same key with the same pepper, in the same run.
 *    Prints ns per call for both and the ratio.
 * 2. Expiry lateness: E keys (default 2,000) with ttls staggered over 5-30 s, the access key
 *    controller running; each deletion is observed through a watch and compared with the key's
 *    deadline (creationTimestamp + ttl, as stored). Prints p50/p99/max lateness.
 *
 *   bench/auth/run.sh [K=10000] [E=2000]
 */
import { createHmac, randomBytes } from 'node:crypto';
import { CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import type { OwnedAccessKey } from '../../src/api/ownedaccesskey.ts';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import { resources, type Stored } from '../../src/controllers/resources.ts';
import { setupAccessKeyAuthenticator } from '../../src/identity/authenticator.ts';
import { generateAccessKey, hashAccessKey } from '../../src/identity/keys.ts';
import { PepperStore } from '../../src/identity/pepper.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Informer } from '../../src/runtime/informer.ts';
import { collectionPath, KubeClient } from '../../src/runtime/kube-client.ts';
import { Manager } from '../../src/runtime/manager.ts';
import { pool, quantile, withBenchCluster } from '../support.ts';

const KEYS = Number(process.argv[2] ?? 10_000);
const EXPIRING = Number(process.argv[3] ?? 2_000);
const PLATFORM_NAMESPACE = 'platform-system';
const ITERATIONS = 200_000;
const quiet = pino({ level: 'silent' });

const keyObject = (name: string, id: string, hash: string, spec: Partial<OwnedAccessKey['spec']> = {}) => ({
  apiVersion: 'management.platform/v1',
  kind: 'OwnedAccessKey',
  metadata: { name },
  spec: { subject: `bench-${name}`, type: 'Other', keyId: id, keyHash: hash, ...spec },
});

/** Nanoseconds per call of `fn` over `iterations` calls, after a warm-up. */
function nsPerCall(iterations: number, fn: (i: number) => void): number {
  for (let i = 0; i < 10_000; i++) fn(i);
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn(i);
  return Number(process.hrtime.bigint() - start) / iterations;
}

async function main(): Promise<void> {
  await withBenchCluster('auth', async (cluster, kc) => {
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
    const api = new KubeClient(kc);
    const pepper = await new PepperStore(api, PLATFORM_NAMESPACE, randomBytes).ensure();
    const path = collectionPath(resources.ownedAccessKeys);

    // 1. Authentication with KEYS keys in the cache.
    const tokens: string[] = [];
    const bodies = Array.from({ length: KEYS }, (_, i) => {
      const generated = generateAccessKey(randomBytes);
      tokens.push(generated.key);
      return keyObject(`key-${i}`, generated.id, hashAccessKey(generated.key, pepper));
    });
    const createStart = performance.now();
    await pool(KEYS, 32, (i) => api.request({ method: 'POST', path, body: bodies[i] }));
    process.stdout.write(
      `created ${KEYS} keys in ${((performance.now() - createStart) / 1000).toFixed(1)} s\n`,
    );

    const manager = new Manager({
      api,
      clock: systemClock,
      random: systemRandom,
      logger: quiet,
      registry: new Registry(),
    });
    const authenticator = setupAccessKeyAuthenticator(manager, {
      api,
      clock: systemClock,
      pepper: new PepperStore(api, PLATFORM_NAMESPACE, randomBytes),
      platformNamespace: PLATFORM_NAMESPACE,
    });
    await manager.start();
    await authenticator.start();
    while (!authenticator.ready() || authenticator.keys.list().length < KEYS) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    let failures = 0;
    const authNs = nsPerCall(ITERATIONS, (i) => {
      if (!authenticator.authenticateCached(tokens[(i * 7919) % KEYS]!).ok) failures++;
    });
    const hmacNs = nsPerCall(ITERATIONS, (i) => {
      createHmac('sha256', pepper)
        .update(tokens[(i * 7919) % KEYS]!)
        .digest();
    });
    await authenticator.stop();
    await manager.stop();
    process.stdout.write(
      [
        `authentication, ${KEYS} keys cached: ${(authNs / 1000).toFixed(2)} µs/call (${Math.round(1e9 / authNs)} calls/s), ${failures} failures`,
        `bare HMAC-SHA-256 of the same key:  ${(hmacNs / 1000).toFixed(2)} µs/call (${Math.round(1e9 / hmacNs)} calls/s)`,
        `ratio: ${(authNs / hmacNs).toFixed(2)}x`,
        '',
      ].join('\n'),
    );

    // 2. Expiry lateness of EXPIRING keys with staggered ttls.
    const operator = createOperator(
      defaultOperatorOptions({
        kubeconfig: cluster.kubeconfigPath,
        namespace: PLATFORM_NAMESPACE,
        controllers: ['accesskey'],
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'warn',
      }),
      process.env.BENCH_LOG ? pino({ level: 'warn' }, pino.destination(2)) : quiet,
    );
    await operator.start();
    const deadlines = new Map<string, number>();
    const lateness: number[] = [];
    const late: { ms: number; deadline: number }[] = [];
    let createdAll = 0;
    const watcher = new Informer<Stored<OwnedAccessKey>>({
      api,
      resource: resources.ownedAccessKeys,
      labelSelector: 'bench=expiry',
      clock: systemClock,
      random: systemRandom,
      logger: quiet,
    });
    let allGone: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      allGone = resolve;
    });
    watcher.addEventHandler({
      onAdd: (key) => {
        const ttl = key.spec.ttl ?? 0;
        deadlines.set(
          key.metadata.name ?? '',
          Date.parse(String(key.metadata.creationTimestamp)) + ttl * 1000,
        );
      },
      onUpdate: () => {},
      onDelete: (key) => {
        const deadline = deadlines.get(key.metadata.name ?? '');
        if (deadline !== undefined) {
          lateness.push(Date.now() - deadline);
          late.push({ ms: Date.now() - deadline, deadline });
        }
        if (lateness.length === EXPIRING) allGone();
      },
    });
    watcher.start();
    await watcher.waitForSync();
    await pool(EXPIRING, 32, (i) => {
      const generated = generateAccessKey(randomBytes);
      const body = keyObject(`expiring-${i}`, generated.id, hashAccessKey(generated.key, pepper), {
        ttl: 5 + (i % 26),
      });
      return api.request({
        method: 'POST',
        path,
        body: { ...body, metadata: { ...body.metadata, labels: { bench: 'expiry' } } },
      });
    });
    createdAll = Date.now();
    await done;
    const worst = late
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 5)
      .map((l) => `${l.ms}ms@${l.deadline - createdAll}`);
    process.stdout.write(`worst (lateness@deadline relative to end of creation): ${worst.join(' ')}\n`);
    await watcher.stop();
    await operator.stop();
    process.stdout.write(
      `expiry of ${EXPIRING} keys (ttl 5-30 s), lateness after the stored deadline: p50 ${quantile(lateness, 0.5)} ms, p99 ${quantile(lateness, 0.99)} ms, max ${Math.max(...lateness)} ms, early ${lateness.filter((ms) => ms < 0).length}\n`,
    );
  });
}

await main();

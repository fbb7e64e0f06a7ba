import { Agent, type Dispatcher, request } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Hole 5 of issue 16: one pool of 64 upstream connections served everything, so 64 long watches
 * (`timeoutSeconds` is the caller's) made every other request wait for its timeout; and only
 * `watch=true|1` was a watch while kube-apiserver takes every value but `0`/`false`, so
 * `watch=yes` was buffered as a list and answered without the redaction of key fields
 * (`spec.identity.connectorData` leaked). Here 70 watches (more than the ordinary pool) are held
 * while others are served, the 71st of one identity is 429, the server ends a watch asked for an
 * hour after its cap, and every shape of answer about keys is checked for the secret.
 */
describe('security: watches cannot starve the gateway or skip redaction', () => {
  const env = useGatewayEnv({ gateway: { watchLimits: { perIdentity: 70, maxTimeoutSeconds: 6 } } });
  const namespace = uniqueName('watched');
  const SECRET = `connector-data-${uniqueName('s')}`;
  let admin: string;
  let alice: string;
  let aliceKey: string;
  const agent = new Agent({ connections: 200 });

  beforeAll(async () => {
    await env().core.createNamespace({ body: { metadata: { name: namespace } } });
    admin = await env().user(uniqueName('root'), { admin: true });
    alice = await env().user(uniqueName('alice'));
    // The key may not be cached yet: `authenticate` reads it past the caches then.
    const identity = await env().gateway.authenticator.authenticate(alice);
    if (!identity.ok) throw new Error('alice is not authenticated');
    aliceKey = identity.identity.accessKey.name;
    // What a connector keeps for later requests: never shared through the API.
    await new KubeClient(env().kc).request({
      method: 'PATCH',
      path: `/apis/${GROUP_VERSION}/ownedaccesskeys/${aliceKey}`,
      contentType: 'application/merge-patch+json',
      body: { spec: { identity: { connector: 'oidc', connectorData: SECRET } } },
    });
  });

  /** Opens a request and returns its status and a reader of its first bytes (or all of them). */
  async function open(
    url: string,
    token: string,
    headers: Record<string, string> = {},
    dispatcher: Dispatcher = agent,
  ) {
    const controller = new AbortController();
    const response = await request(url, {
      dispatcher,
      signal: controller.signal,
      headers: { authorization: `Bearer ${token}`, ...headers },
    });
    let ended = false;
    const chunks: Buffer[] = [];
    const reading = (async () => {
      try {
        for await (const chunk of response.body) chunks.push(chunk as Buffer);
      } catch {
        // aborted
      }
      ended = true;
    })();
    return {
      status: response.statusCode,
      text: () => Buffer.concat(chunks).toString('utf8'),
      ended: () => ended,
      close: async () => {
        controller.abort();
        await reading;
      },
    };
  }

  test('70 watches held: others are served, the 71st of one identity is 429, and each ends at the cap', async () => {
    const url = `${env().api}/namespaces/${namespace}/sharedsecrets?watch=1&timeoutSeconds=3600`;
    const watches = await Promise.all(Array.from({ length: 70 }, () => open(url, admin)));
    try {
      expect(watches.map((watch) => watch.status)).toEqual(Array(70).fill(200));
      const refused = await open(url, admin);
      expect(refused.status).toBe(429);
      await refused.close();
      // Requests of anyone, the watcher included, go on being served meanwhile.
      expect(
        (await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, { token: admin })).status,
      ).toBe(200);
      expect((await call(`${env().api}/ownedaccesskeys`, { token: alice })).status).toBe(200);
      const another = await open(`${env().api}/ownedaccesskeys?watch=1`, alice);
      expect(another.status).toBe(200);
      await another.close();
      // Asked for an hour, ended by the server's cap.
      await eventually(
        () => watches.every((watch) => watch.ended()),
        60_000,
        'the watches to end at the cap',
      );
      // Their slots are free again.
      const again = await open(url, admin);
      expect(again.status).toBe(200);
      await again.close();
    } finally {
      await Promise.all(watches.map((watch) => watch.close()));
    }
  });

  const shapes: [string, string, Record<string, string>][] = [
    ['get', `/${'KEY'}`, {}],
    ['get as YAML', `/${'KEY'}`, { accept: 'application/yaml' }],
    ['get, pretty', `/${'KEY'}?pretty=true`, {}],
    ['list', '', {}],
    ['list, pretty', '?pretty=true', {}],
    ['list as YAML', '', { accept: 'application/yaml' }],
    [
      'list as a Table with objects',
      '?includeObject=Object',
      { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
    ],
    ['watch=true', '?watch=true&timeoutSeconds=2', {}],
    ['watch=1', '?watch=1&timeoutSeconds=2', {}],
    ['watch=yes', '?watch=yes&timeoutSeconds=2', {}],
    ['watch= (empty)', '?watch=&timeoutSeconds=2', {}],
    ['watch=TRUE, pretty', '?watch=TRUE&pretty=true&timeoutSeconds=2', {}],
  ];

  for (const [who, token] of [
    ['a platform admin (the impersonating proxy)', () => admin],
    ['the owner (the gateway acting as itself)', () => alice],
  ] as const) {
    test.each(shapes)(`${who}: %s never shows connectorData`, async (_name, suffix, headers) => {
      const url = `${env().api}/ownedaccesskeys${suffix.replace('KEY', aliceKey)}`;
      const answer = await open(url, token(), headers);
      expect(answer.status).toBe(200);
      await eventually(() => answer.ended() || answer.text().includes(aliceKey), 30_000, 'the answer');
      await answer.close();
      expect(answer.text()).toContain(aliceKey);
      expect(answer.text()).not.toContain(SECRET);
    });
  }
});

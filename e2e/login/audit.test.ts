import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call } from '../gateway/support.ts';
import { auditDirText } from '../support/access-proxy.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { useLoginEnv } from './support/login-env.ts';

/**
 * docs/login.md, "Where": the gateway's audit log records the requests under `/auth` and never
 * their bodies, at the level that logs every other request's request and response bodies
 * (`level: 4`): no password, old or new, no key and no device token a sign-in answered with.
 */

const env = useLoginEnv();

const post = (path: string, body: unknown, token?: string) =>
  call(`${env().platformUrl}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    ...(token ? { token } : {}),
    dispatcher: env().gateway.dispatcher,
  });

describe('the audit log and the login endpoints', () => {
  it('records sign-ins and password changes at level 4, and none of their bodies', async () => {
    const auditDir = mkdtempSync(join(tmpdir(), 'login-audit-'));
    await env().configure(`audit:\n  enabled: true\n  path: ${auditDir}/audit.log\n  level: 4\n`);
    const g = env().gateway;
    const admin = await g.user(uniqueName('auditadmin'), { admin: true });
    await g.accepted(admin);
    // The audit configuration is in force once a request body is logged with it (a patch: the
    // built-in rules log the creation of a SharedSecret as metadata only).
    const sharedSecrets = `${g.api}/namespaces/default/sharedsecrets`;
    const created = await call(sharedSecrets, {
      method: 'POST',
      token: admin,
      dispatcher: g.dispatcher,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'management.platform/v1',
        kind: 'SharedSecret',
        metadata: { name: 'audit-probe' },
        spec: {},
      }),
    });
    expect(created.status, created.text).toBe(201);
    const marker = uniqueName('audit-marker');
    await eventually(
      async () => {
        await call(`${sharedSecrets}/audit-probe`, {
          method: 'PATCH',
          token: admin,
          dispatcher: g.dispatcher,
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ spec: { description: marker } }),
        });
        return auditDirText(auditDir).includes(marker);
      },
      60_000,
      'the gateway to log request bodies',
    );

    const secrets = {
      first: `first-${uniqueName('pw')}`,
      wrong: `wrong-${uniqueName('pw')}`,
      byAdmin: `admin-${uniqueName('pw')}`,
      own: `own-${uniqueName('pw')}`,
    };
    const name = await env().userWithPassword('audited', secrets.first);
    const signedIn = await post('/auth/password/login', { username: name, password: secrets.first });
    expect(signedIn.status, signedIn.text).toBe(200);
    expect((await post('/auth/password/login', { username: name, password: secrets.wrong })).status).toBe(
      401,
    );
    const set = await post(`/auth/users/${name}/password`, { password: secrets.byAdmin }, admin);
    expect(set.status, set.text).toBe(200);
    const again = (await post('/auth/password/login', { username: name, password: secrets.byAdmin })).json;
    await g.accepted(again.key);
    const changed = await post(
      `/auth/users/${name}/password`,
      { oldPassword: secrets.byAdmin, password: secrets.own },
      again.key,
    );
    expect(changed.status, changed.text).toBe(200);

    // Each request is in the log (the last one written after the others)...
    const events = () =>
      auditDirText(auditDir)
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map(
          (line) => JSON.parse(line) as { requestURI: string; stage: string; user?: { username?: string } },
        );
    await eventually(
      async () =>
        events().filter(
          (e) => e.requestURI === `/auth/users/${name}/password` && e.stage === 'ResponseComplete',
        ).length === 2,
      30_000,
      'both password changes in the audit log',
    );
    expect(
      events().filter((e) => e.requestURI === '/auth/password/login' && e.stage === 'ResponseComplete')
        .length,
    ).toBeGreaterThanOrEqual(3);
    // The password API is audited as what scope checks see it as: `update users/password`.
    const setByAdmin = events().find(
      (e) => e.requestURI === `/auth/users/${name}/password` && e.stage === 'ResponseComplete',
    ) as unknown as { verb: string; objectRef?: Record<string, string> };
    expect(setByAdmin.verb).toBe('update');
    expect(setByAdmin.objectRef).toMatchObject({ resource: 'users', subresource: 'password', name });
    // ...and nothing of their bodies is.
    const text = auditDirText(auditDir);
    const carried = [
      ...Object.values(secrets),
      signedIn.json.key,
      signedIn.json.deviceToken,
      again.key,
      again.deviceToken,
    ];
    expect(carried.filter((value) => typeof value !== 'string' || value === '')).toEqual([]);
    expect(carried.filter((value) => text.includes(value))).toEqual([]);
  });
});

import { randomBytes } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyJsonPatch } from '../../test-support/json-patch.ts';
import { generateAccessKey, hashAccessKey } from '../identity/keys.ts';
import { createCertificateAuthority, issueCertificate } from '../pki/certificates.ts';
import { invalid } from './decision.ts';
import { admissionResponse, MalformedAdmissionReview, parseAdmissionReview } from './review.ts';
import { metadataUpdateCauses, ownerReferencesNeedingDeletePermission } from './rules/metadata.ts';
import { mutateOwnedAccessKey, validateOwnedAccessKey } from './rules/ownedaccesskey.ts';
import { AdmissionServer } from './server.ts';

const PEPPER = new Uint8Array(32).fill(7);
const review = (request: Record<string, unknown>) => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'u-1',
    kind: { group: 'management.platform', version: 'v1', kind: 'SharedSecret' },
    resource: { group: 'management.platform', version: 'v1', resource: 'sharedsecrets' },
    operation: 'CREATE',
    userInfo: { username: 'alice', groups: ['g'], extra: { scopes: ['a'] } },
    object: { metadata: { name: 's' } },
    ...request,
  },
});

describe('AdmissionReview adapter', () => {
  it('echoes the uid and carries a denial as a Status with code, reason, message and causes', () => {
    const request = parseAdmissionReview(review({}));
    const decision = invalid({ kind: 'SharedSecret', name: 's' }, [
      {
        field: 'spec.access[0].verbs[0]',
        message: 'Unsupported value: "x"',
        reason: 'FieldValueNotSupported',
      },
    ]);
    const { response } = admissionResponse(request, decision);
    expect(response.uid).toBe('u-1');
    expect(response.allowed).toBe(false);
    expect(response.status).toMatchObject({
      code: 422,
      reason: 'Invalid',
      message: 'SharedSecret "s" is invalid: spec.access[0].verbs[0]: Unsupported value: "x"',
      details: {
        name: 's',
        kind: 'SharedSecret',
        causes: [{ field: 'spec.access[0].verbs[0]', reason: 'FieldValueNotSupported' }],
      },
    });
  });

  it('sends mutations as a base64 JSONPatch and warnings as single lines', () => {
    const request = parseAdmissionReview(review({}));
    const { response } = admissionResponse(request, {
      allowed: true,
      causes: [],
      warnings: ['two\nlines'],
      patches: [{ op: 'remove', path: '/spec/key' }],
    });
    expect(response.patchType).toBe('JSONPatch');
    expect(JSON.parse(Buffer.from(response.patch!, 'base64').toString())).toEqual([
      { op: 'remove', path: '/spec/key' },
    ]);
    expect(response.warnings).toEqual(['two lines']);
  });

  it.each([
    ['not an object', 42],
    ['wrong kind', { apiVersion: 'admission.k8s.io/v1', kind: 'Nope', request: {} }],
    ['no uid', review({ uid: '' })],
    ['bad operation', review({ operation: 'EXPLODE' })],
    ['object not an object', review({ object: 'x' })],
    ['no resource', review({ resource: null })],
  ])('refuses a malformed review (%s) with MalformedAdmissionReview', (_, body) => {
    expect(() => parseAdmissionReview(body)).toThrow(MalformedAdmissionReview);
  });
});

describe('OwnedAccessKey mutation', () => {
  it('replaces the key by its keyed hash and id; applied twice equals applied once', () => {
    const { key, id } = generateAccessKey(randomBytes);
    const object = { metadata: { name: 'k' }, spec: { user: 'alice', key } };
    const once = applyJsonPatch(object, mutateOwnedAccessKey(object, PEPPER).patches);
    expect(once.spec).toEqual({ user: 'alice', keyHash: hashAccessKey(key, PEPPER), keyId: id });
    const again = mutateOwnedAccessKey(once, PEPPER);
    expect(again.allowed).toBe(true);
    expect(again.patches).toEqual([]);
    expect(applyJsonPatch(once, again.patches)).toEqual(once);
  });

  it("takes the plaintext key out of kubectl apply's last-applied annotation", () => {
    const { key } = generateAccessKey(randomBytes);
    const applied = JSON.stringify({ kind: 'OwnedAccessKey', spec: { user: 'alice', key } });
    const object = {
      metadata: { name: 'k', annotations: { 'kubectl.kubernetes.io/last-applied-configuration': applied } },
      spec: { user: 'alice', key },
    };
    const mutated = applyJsonPatch(object, mutateOwnedAccessKey(object, PEPPER).patches);
    expect(JSON.stringify(mutated)).not.toContain(key);
    expect(
      JSON.parse(mutated.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']),
    ).toEqual({ kind: 'OwnedAccessKey', spec: { user: 'alice' } });
    // An annotation that cannot be read is removed rather than kept with a possible key in it.
    const unreadable = {
      ...object,
      metadata: { annotations: { 'kubectl.kubernetes.io/last-applied-configuration': `{${key}` } },
    };
    const cleaned = applyJsonPatch(unreadable, mutateOwnedAccessKey(unreadable, PEPPER).patches);
    expect(cleaned.metadata.annotations).toEqual({});
    // Already clean: nothing to do.
    expect(mutateOwnedAccessKey(mutated, PEPPER).patches).toEqual([]);
  });

  it('refuses a key whose supplied hash does not match', () => {
    const { key } = generateAccessKey(randomBytes);
    const decision = mutateOwnedAccessKey({ spec: { key, keyHash: 'f'.repeat(64) } }, PEPPER);
    expect(decision).toMatchObject({ allowed: false, code: 422, causes: [{ field: 'spec.keyHash' }] });
  });

  it('checks the ttl against the platform maximum only when it changes', () => {
    const stored = { metadata: { name: 'k' }, spec: { keyHash: 'a'.repeat(64), keyId: 'abc', ttl: 7200 } };
    expect(validateOwnedAccessKey(undefined, stored, 3600)).toMatchObject({ allowed: false, code: 422 });
    expect(validateOwnedAccessKey(stored, stored, 3600).allowed).toBe(true);
    expect(validateOwnedAccessKey(undefined, stored, undefined).allowed).toBe(true);
  });

  it('admits the deprecated spec.parent and spec.oidcLogin with a warning naming each, on create and update', () => {
    const plain = { metadata: { name: 'k' }, spec: { keyHash: 'a'.repeat(64), keyId: 'abc' } };
    const deprecated = { ...plain, spec: { ...plain.spec, parent: 'p', oidcLogin: { idToken: 'id-token' } } };
    for (const decision of [
      validateOwnedAccessKey(undefined, deprecated, undefined),
      validateOwnedAccessKey(plain, deprecated, undefined),
    ]) {
      expect(decision.allowed).toBe(true);
      expect(decision.warnings.map((w) => w.slice(0, w.indexOf(':')))).toEqual([
        'spec.parent',
        'spec.oidcLogin',
      ]);
      expect(decision.warnings.join('\n')).not.toContain('id-token');
    }
    expect(validateOwnedAccessKey(undefined, plain, undefined).warnings).toEqual([]);
  });
});

describe('metadata rules', () => {
  const ref = (uid: string, blockOwnerDeletion?: boolean) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    name: uid,
    uid,
    blockOwnerDeletion,
  });
  it('needs delete permission only for references newly blocking', () => {
    const old = { metadata: { ownerReferences: [ref('a', true), ref('b', false)] } };
    const next = {
      metadata: { ownerReferences: [ref('a', true), ref('b', true), ref('c', true), ref('d')] },
    };
    expect(ownerReferencesNeedingDeletePermission(old, next).map((n) => n.reference.uid)).toEqual(['b', 'c']);
  });

  it('lets deletionTimestamp and the grace period only shrink, and finalizers only go', () => {
    const old = {
      deletionTimestamp: '2030-01-01T00:00:10Z',
      deletionGracePeriodSeconds: 30,
      finalizers: ['a', 'b'],
    };
    expect(metadataUpdateCauses(old, { ...old, finalizers: ['b'] })).toEqual([]);
    expect(
      metadataUpdateCauses(old, {
        ...old,
        deletionTimestamp: '2030-01-01T00:00:05Z',
        deletionGracePeriodSeconds: 5,
      }),
    ).toEqual([]);
    const fields = (m: object) => metadataUpdateCauses(old, m).map((c) => c.field);
    expect(fields({ ...old, deletionTimestamp: undefined })).toContain('metadata.deletionTimestamp');
    expect(fields({ ...old, deletionTimestamp: '2030-01-01T00:01:00Z' })).toContain(
      'metadata.deletionTimestamp',
    );
    expect(fields({ ...old, deletionGracePeriodSeconds: 60 })).toContain(
      'metadata.deletionGracePeriodSeconds',
    );
    expect(fields({ ...old, finalizers: ['a', 'c'] })).toContain('metadata.finalizers');
  });
});

describe('AdmissionServer', () => {
  let server: AdmissionServer;
  let caPem: string;
  beforeAll(async () => {
    const ca = await createCertificateAuthority('test-ca', 3600);
    caPem = ca.certPem;
    const serving = await issueCertificate(ca, {
      commonName: 'localhost',
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
      validForSeconds: 3600,
    });
    const material = { certPem: serving.certPem, keyPem: serving.keyPem, caBundlePem: ca.certPem };
    server = await AdmissionServer.start({
      host: '127.0.0.1',
      port: 0,
      certificates: { current: () => material, subscribe: () => () => {} },
      paths: ['/validate'],
      review: async (_path, request) => {
        if (request.name === 'boom') throw new Error('rule crashed');
        return { allowed: true, causes: [], warnings: [], patches: [] };
      },
    });
  });
  afterAll(async () => {
    await server.stop();
  });

  const post = (path: string, body: string, contentType = 'application/json') =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpsRequest(
        {
          host: '127.0.0.1',
          port: server.port,
          path,
          method: 'POST',
          ca: caPem,
          headers: { 'Content-Type': contentType },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => {
            text += c.toString();
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  it('answers malformed bodies with 4xx and keeps serving', async () => {
    expect((await post('/validate', '{not json')).status).toBe(400);
    expect((await post('/validate', JSON.stringify({ kind: 'AdmissionReview' }))).status).toBe(400);
    expect((await post('/validate', '{}', 'text/plain')).status).toBe(415);
    expect((await post('/elsewhere', '{}')).status).toBe(404);
    expect((await post('/validate', JSON.stringify(review({ name: 'boom' })))).status).toBe(500);
    const ok = await post('/validate', JSON.stringify(review({})));
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body).response).toEqual({ uid: 'u-1', allowed: true });
  });
});

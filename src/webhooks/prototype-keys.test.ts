import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyJsonPatch } from '../../test-support/json-patch.ts';
import {
  PROTOTYPE_KEYS,
  PROTOTYPE_LABEL_KEYS,
  recordWithPrototypeKeys,
} from '../../test-support/prototype-keys.ts';
import { generateAccessKey } from '../identity/keys.ts';
import { pointerToken } from './decision.ts';
import { parseAdmissionReview } from './review.ts';
import { mutateOwnedAccessKey, validateOwnedAccessKey } from './rules/ownedaccesskey.ts';
import { syncSourceToAuthorize, validatePlatformConfigSecret } from './rules/secret.ts';
import { namedIdentities, validateSharedSecret } from './rules/sharedsecret.ts';

// Admission with keys named like Object.prototype members (`constructor`, `toString`, `__proto__`)
// in every map a requester controls (issue 29): such keys are data, they change no decision and
// no other field, and they survive a review and a patch exactly. Every generated map holds one.

const PEPPER = new Uint8Array(32).fill(7);
/** JSON as a requester sends it: `__proto__` is an own key. */
const json = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;
const values = fc.constantFrom('', 'v', 'dmFsdWU=');
/** Other keys that no rule reads (a random one could be `key` or `config`, which rules do read). */
const otherKeys = fc.constantFrom('note', 'example.com/team');
const anyKeyMap = recordWithPrototypeKeys(values, { otherKeys });
const labelMap = recordWithPrototypeKeys(values, { otherKeys, prototypeKeys: PROTOTYPE_LABEL_KEYS });

describe('admission with keys named like Object.prototype members', () => {
  it('a review keeps every userInfo.extra key, `__proto__` included, exactly', () => {
    fc.assert(
      fc.property(recordWithPrototypeKeys(fc.array(fc.constantFrom('a', 'b'), { maxLength: 2 })), (extra) => {
        const request = parseAdmissionReview(
          JSON.parse(
            JSON.stringify({
              apiVersion: 'admission.k8s.io/v1',
              kind: 'AdmissionReview',
              request: {
                uid: 'u',
                kind: { group: '', version: 'v1', kind: 'Secret' },
                operation: 'CREATE',
                resource: { group: '', version: 'v1', resource: 'secrets' },
                userInfo: { username: 'alice', extra },
                object: {},
              },
            }),
          ),
        );
        expect(JSON.stringify(request.userInfo.extra ?? {})).toBe(JSON.stringify(extra));
        expect(Object.getPrototypeOf(request.userInfo.extra ?? {})).toBe(Object.prototype);
      }),
    );
  });

  it('labels, annotations and data with such keys change no Secret or SharedSecret decision', () => {
    fc.assert(
      fc.property(labelMap, labelMap, anyKeyMap, (labels, annotations, data) => {
        const plain = { metadata: { name: 's', labels: {}, annotations: {} }, data: {} };
        const hostile = json({ metadata: { name: 's', labels, annotations }, data, stringData: data });
        expect(syncSourceToAuthorize(undefined, hostile)).toEqual(syncSourceToAuthorize(undefined, plain));
        expect(validatePlatformConfigSecret(hostile)).toEqual(validatePlatformConfigSecret(plain));
        const shared = json({
          metadata: { name: 's', labels, annotations },
          spec: { data, access: [{ verbs: ['get'], users: ['alice'], teams: [] }] },
        });
        expect(namedIdentities(shared)).toEqual({ users: ['alice'], teams: [] });
        expect(validateSharedSecret(shared, { users: [], teams: [] }).allowed).toBe(true);
      }),
    );
  });

  it("an access key's mutation keeps every other key of the object, whatever its name", () => {
    fc.assert(
      fc.property(labelMap, anyKeyMap, (annotations, extraSpec) => {
        const { key, id } = generateAccessKey(randomBytes);
        const object = json({
          metadata: { name: 'k', annotations },
          spec: { ...extraSpec, user: 'alice', key },
        });
        const decision = mutateOwnedAccessKey(object, PEPPER);
        expect(decision.allowed).toBe(true);
        const mutated = applyJsonPatch(object, decision.patches ?? []) as typeof object;
        const { key: _key, ...kept } = object.spec;
        const { keyHash, keyId, ...rest } = mutated.spec as typeof object.spec & {
          keyHash: string;
          keyId: string;
        };
        expect(JSON.stringify(mutated.metadata)).toBe(JSON.stringify(object.metadata));
        expect(JSON.stringify(rest)).toBe(JSON.stringify(kept));
        expect([typeof keyHash, keyId]).toEqual(['string', id]);
        expect(JSON.stringify(mutated)).not.toContain(key);
        expect(validateOwnedAccessKey(undefined, mutated, undefined).allowed).toBe(true);
      }),
    );
  });

  it.each(PROTOTYPE_KEYS)(
    'a JSON patch at a key %s writes and removes that key, nothing inherited',
    (key) => {
      const document = json({ metadata: { annotations: {} } });
      const path = `/metadata/annotations/${pointerToken(key)}`;
      const added = applyJsonPatch(document, [{ op: 'add', path, value: 'v' }]);
      expect(JSON.stringify(added)).toBe(
        JSON.stringify({ metadata: { annotations: JSON.parse(`{"${key}":"v"}`) } }),
      );
      expect(Object.getPrototypeOf(added.metadata.annotations)).toBe(Object.prototype);
      const removed = applyJsonPatch(added, [{ op: 'remove', path }]);
      expect(JSON.stringify(removed)).toBe(JSON.stringify(document));
    },
  );
});

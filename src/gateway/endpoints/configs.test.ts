import { describe, expect, test } from 'vitest';
import { failureStatus, StatusError } from '../../api/status.ts';
import { dryRunSearch, secretWriteRefusal } from './configs.ts';

describe('dryRunSearch: the caller’s dryRun values, passed on to the Secret write as given', () => {
  test.each([
    ['', ''],
    ['fieldManager=kubectl', ''],
    ['dryRun=All', '?dryRun=All'],
    ['dryRun=All&fieldValidation=Strict&dryRun=All', '?dryRun=All&dryRun=All'],
    // Values kube-apiserver refuses reach it, so it refuses them, instead of a write or a silent dry run.
    ['dryRun=', '?dryRun='],
    ['dryRun', '?dryRun='],
    ['dryRun=Some', '?dryRun=Some'],
    ['dryRun=a%26b%3Dc', '?dryRun=a%26b%3Dc'],
  ])('%j → %j', (query, search) => {
    expect(dryRunSearch(new URLSearchParams(query))).toBe(search);
  });
});

describe('secretWriteRefusal: what the caller is answered when the Secret write is refused', () => {
  test("a client error with the apiserver's Status is that Status, causes and all", () => {
    const status = failureStatus(422, 'Invalid', 'secrets "platform-config" is invalid: denied', {
      name: 'platform-config',
      kind: 'secrets',
      causes: [{ field: 'dryRun', reason: 'FieldValueNotSupported', message: 'Unsupported value' }],
    });
    const refusal = secretWriteRefusal({ statusCode: 422, body: status });
    expect(refusal).toBeInstanceOf(StatusError);
    expect(refusal.toStatus()).toEqual(status);
  });

  test.each([
    ['a server error', 500, failureStatus(500, 'InternalError', 'etcd is down')],
    ['a client error without a Status', 409, { kind: 'Secret', metadata: {} }],
    ['no body', 400, undefined],
    ['a Status without a reason', 400, { kind: 'Status', message: 'x', code: 400 }],
  ])('%s is the gateway’s own 503', (_what, statusCode, body) => {
    const refusal = secretWriteRefusal({ statusCode, body });
    expect(refusal.code).toBe(503);
    expect(refusal.message).toBe('the platform config could not be stored');
  });
});

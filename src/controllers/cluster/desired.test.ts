import { describe, expect, test } from 'vitest';
import {
  type ClusterAccess,
  RECHECK_MS,
  RETRY_CONNECTION_MS,
  readyCondition,
  recheckAfter,
} from './desired.ts';

const reachable: ClusterAccess = {
  phase: 'probed',
  reachability: { reachable: true, username: 'system:serviceaccount:kube-system:platform' },
};
const unauthorized: ClusterAccess = {
  phase: 'probed',
  reachability: {
    reachable: false,
    reason: 'Unauthorized',
    message: "the API server at https://c:6443 refused the platform's credentials (401)",
  },
};
const unreachable: ClusterAccess = {
  phase: 'probed',
  reachability: {
    reachable: false,
    reason: 'Unreachable',
    message: 'cannot reach the API server at https://c:6443: ECONNREFUSED',
  },
};
const missing: ClusterAccess = {
  phase: 'noCredentials',
  reason: 'CredentialsMissing',
  message: 'Secret platform/c does not exist',
};
const invalid: ClusterAccess = {
  phase: 'noCredentials',
  reason: 'InvalidCredentials',
  message: 'the kubeconfig is not valid YAML',
};

describe('readyCondition', () => {
  test.each([
    ['reachable: True, Reachable, naming the identity', reachable, 'True', 'Reachable'],
    ['credentials refused: False, Unauthorized', unauthorized, 'False', 'Unauthorized'],
    ['no answer: False, Unreachable', unreachable, 'False', 'Unreachable'],
    ['no Secret: False, CredentialsMissing', missing, 'False', 'CredentialsMissing'],
    ['a bad Secret: False, InvalidCredentials', invalid, 'False', 'InvalidCredentials'],
  ] as const)('%s', (_, access, status, reason) => {
    const condition = readyCondition(access, 3);
    expect(condition).toMatchObject({ type: 'Ready', status, reason, observedGeneration: 3 });
    if (access.phase === 'noCredentials') expect(condition.message).toBe(access.message);
    else if (!access.reachability.reachable) expect(condition.message).toBe(access.reachability.message);
  });

  test('the True message names whom the cluster took the platform for, and nothing that changes', () => {
    expect(readyCondition(reachable, 1).message).toBe(
      "the platform reaches the cluster's API as system:serviceaccount:kube-system:platform",
    );
    expect(
      readyCondition({ phase: 'probed', reachability: { reachable: true, username: '' } }, 1).message,
    ).toBe("the platform reaches the cluster's API");
    // The same inputs give the same condition: a steady cluster writes no status.
    expect(readyCondition(reachable, 1)).toEqual(readyCondition(reachable, 1));
  });

  test('without a generation, no observedGeneration', () => {
    expect(readyCondition(reachable, undefined)).not.toHaveProperty('observedGeneration');
  });
});

describe('recheckAfter', () => {
  test('a minute while reachable, 10 s otherwise, never without a credentials reference', () => {
    expect(recheckAfter(reachable, true)).toBe(RECHECK_MS);
    expect(RECHECK_MS).toBe(60_000);
    for (const access of [unauthorized, unreachable, missing, invalid])
      expect(recheckAfter(access, true)).toBe(RETRY_CONNECTION_MS);
    expect(RETRY_CONNECTION_MS).toBe(10_000);
    expect(recheckAfter(missing, false)).toBeUndefined();
  });
});

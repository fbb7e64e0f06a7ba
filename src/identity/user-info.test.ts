import { describe, expect, it } from 'vitest';
import type { AuthenticatedIdentity } from './authenticate.ts';
import { ACCESS_KEY_EXTRA } from './groups.ts';
import { keyUserInfo } from './user-info.ts';

const identity = (uid: string | undefined): AuthenticatedIdentity => ({
  kind: 'User',
  name: 'alice',
  username: 'alice',
  groups: ['platform:user:alice', 'system:authenticated'],
  uid,
  accessKey: {
    name: 'alice-key',
    id: 'id',
    type: 'User',
    scope: undefined,
    expiresAt: null,
    ttlAfterLastActivity: false,
  },
});

describe('an access key as Kubernetes sees it', () => {
  it('is its username, uid, groups and the key name as the access-key extra', () => {
    expect(keyUserInfo(identity('u-1'))).toEqual({
      username: 'alice',
      uid: 'u-1',
      groups: ['platform:user:alice', 'system:authenticated'],
      extra: { [ACCESS_KEY_EXTRA]: ['alice-key'] },
    });
  });

  it('has no uid without a User or Team object', () => {
    expect(keyUserInfo(identity(undefined))).not.toHaveProperty('uid');
    expect(keyUserInfo(identity(''))).not.toHaveProperty('uid');
  });
});

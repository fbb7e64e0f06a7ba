import type { AccessKeyOwnerInvalid, UserDisabled } from './key-owner.ts';
import type { MalformedAccessKey } from './keys.ts';

/**
 * Why the authentication decision (authenticate.ts, whose module comment gives the order of its
 * steps) refuses a bearer access key. The messages are what callers answer with: none names a
 * secret, and an unknown id and a wrong secret are told alike.
 */

/** Unknown key id or wrong secret; deliberately one class with one message for both. */
export class InvalidAccessKey extends Error {
  override readonly name = 'InvalidAccessKey';
  constructor() {
    super('access key not found or invalid');
  }
}

export class AccessKeyDisabled extends Error {
  override readonly name = 'AccessKeyDisabled';
  constructor() {
    super('access key is disabled');
  }
}

export class AccessKeyExpired extends Error {
  override readonly name = 'AccessKeyExpired';
  constructor(readonly expiredAt: Date | undefined) {
    super('access key expired, log in again');
  }
}

export type AuthenticationFailure =
  | MalformedAccessKey
  | InvalidAccessKey
  | AccessKeyDisabled
  | AccessKeyExpired
  | AccessKeyOwnerInvalid
  | UserDisabled;

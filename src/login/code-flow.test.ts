import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROTOTYPE_KEYS, prototypeKey } from '../../test-support/prototype-keys.ts';
import { describeFailure } from './code-flow.ts';

describe('describeFailure', () => {
  it('says what the known codes mean and words any other code', () => {
    expect(describeFailure({ code: 'OAUTH_JWS_SIGNATURE_VERIFICATION_FAILED' })).toBe(
      'the ID token signature is invalid',
    );
    expect(describeFailure({ code: 'OAUTH_UNSUPPORTED_THING' })).toBe('oauth unsupported thing');
    expect(describeFailure(new Error('no code'))).toBe('the provider answer was refused');
  });

  it('words a code named like an Object.prototype member as any other code (issue 29)', () => {
    fc.assert(
      fc.property(prototypeKey(), (code) => {
        expect(describeFailure({ code })).toBe(code.toLowerCase().replace(/_/g, ' '));
      }),
      { examples: PROTOTYPE_KEYS.map((key): [string] => [key]) },
    );
  });
});

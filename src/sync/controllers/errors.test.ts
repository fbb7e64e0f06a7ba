import { describe, expect, it } from 'vitest';
import { RestrictedFieldPatched } from '../patches/apply.ts';
import { ExpressionError } from '../patches/expression-failures.ts';
import { describeSyncError } from './errors.ts';

describe('describeSyncError: safe to show in an Event, a condition or a log line', () => {
  it('for a Secret, an expression error gives only its class and patch (its message may quote the data)', () => {
    const err = new ExpressionError(
      'sync.toHost.secrets.patches[0].expression',
      'TypeError: s3cr3t is not a function',
    );
    expect(describeSyncError('Secret', err)).toBe(
      'ExpressionError in sync.toHost.secrets.patches[0].expression',
    );
    expect(describeSyncError('ConfigMap', err)).toBe(
      'ExpressionError: sync.toHost.secrets.patches[0].expression: TypeError: s3cr3t is not a function',
    );
  });

  it('a restricted field names the patch and the field, for every kind', () => {
    const err = new RestrictedFieldPatched('sync.toHost.secrets.patches[0].expression', 'type');
    expect(describeSyncError('Secret', err)).toBe(
      'RestrictedFieldPatched: sync.toHost.secrets.patches[0].expression: may not change type',
    );
  });
});

import { describe, expect, it } from 'vitest';
import { ConnectorMisconfigured, ProviderLoginFailed, RefreshRevoked } from './code-flow.ts';
import { NotInAllowedGroups } from './identity.ts';
import { endsTheKey, RenamedAtProvider } from './identity-refresh.ts';
import { HostedDomainRefused } from './idp-a.ts';
import { UnknownUser } from './outcome.ts';

describe('which refresh failures end a key', () => {
  it('ends it when the provider or the platform no longer accepts the person', () => {
    for (const err of [
      new RefreshRevoked('x'),
      new NotInAllowedGroups(),
      new HostedDomainRefused(),
      new UnknownUser(),
      new RenamedAtProvider(),
    ])
      expect(endsTheKey(err)).toBe(true);
  });

  it('keeps it when the provider could not be asked', () => {
    for (const err of [
      new ProviderLoginFailed('x'),
      new ConnectorMisconfigured('x'),
      new Error('ECONNRESET'),
    ])
      expect(endsTheKey(err)).toBe(false);
  });
});

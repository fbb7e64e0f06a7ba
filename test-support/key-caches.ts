import { randomBytes } from 'node:crypto';
import type { Team, User } from '../src/api/identity.ts';
import type { OwnedAccessKey } from '../src/api/ownedaccesskey.ts';
import type { KeyAuthority } from '../src/gateway/sessions.ts';
import {
  type AuthenticatedIdentity,
  type AuthenticationContext,
  authenticateAccessKey,
  type KeyRecord,
  keyStanding,
  newKeyRecord,
} from '../src/identity/authenticate.ts';
import type { IdentityChange } from '../src/identity/authenticator.ts';
import { generateAccessKey, hashAccessKey } from '../src/identity/keys.ts';
import type { FakeClock } from './fake-clock.ts';

export const PEPPER = randomBytes(32);
export const CREATED = '2025-01-01T00:00:00Z';

/**
 * The authenticator's side, in memory: key records by name, Users and Teams, decided by the
 * authentication decision itself (`keyStanding`), and the changes the informers would report
 * (each after the caches hold it, as the authenticator does).
 */
export class KeyCaches implements KeyAuthority {
  readonly records = new Map<string, KeyRecord>();
  readonly users = new Map<string, User>();
  readonly teams = new Map<string, Team>();
  private readonly listeners: ((change: IdentityChange) => void)[] = [];
  readonly context: AuthenticationContext;

  constructor(readonly clock: FakeClock) {
    this.context = {
      lookupKey: () => [],
      // The records with that id, chained as the authenticator files them (this holder's own records).
      lookupRecord: (id) => {
        let first: KeyRecord | undefined;
        for (const record of [...this.records.values()].reverse()) {
          if (record.keyId !== id) continue;
          record.sameId = first;
          first = record;
        }
        return first;
      },
      lookupUser: (name) => this.users.get(name),
      lookupTeam: (name) => this.teams.get(name),
      pepper: PEPPER,
      now: () => new Date(clock.now()),
      limits: {},
    };
  }

  standing(identity: AuthenticatedIdentity) {
    const record = this.records.get(identity.accessKey.name);
    if (!record || record.keyId !== identity.accessKey.id) return undefined;
    return keyStanding(record, identity.accessKey.id, this.context);
  }

  onIdentityChange(listener: (change: IdentityChange) => void): void {
    this.listeners.push(listener);
  }

  private changed(change: IdentityChange): void {
    for (const listener of this.listeners) listener(change);
  }

  putKey(key: OwnedAccessKey): void {
    this.records.set(key.metadata.name ?? '', newKeyRecord(key));
    this.changed({ kind: 'key', name: key.metadata.name ?? '' });
  }

  deleteKey(name: string): void {
    this.records.delete(name);
    this.changed({ kind: 'key', name });
  }

  putUser(user: User): void {
    this.users.set(user.metadata.name ?? '', user);
    this.changed({ kind: 'user', name: user.metadata.name ?? '' });
  }

  deleteUser(name: string): void {
    this.users.delete(name);
    this.changed({ kind: 'user', name });
  }

  putTeam(team: Team): void {
    this.teams.set(team.metadata.name ?? '', team);
    this.changed({ kind: 'team', name: team.metadata.name ?? '' });
  }

  deleteTeam(name: string): void {
    this.teams.delete(name);
    this.changed({ kind: 'team', name });
  }

  limitsChanged(): void {
    this.changed({ kind: 'limits' });
  }

  /** A new key in the caches, and the identity it authenticates as. */
  addKey(spec: Partial<OwnedAccessKey['spec']>): { object: OwnedAccessKey; identity: AuthenticatedIdentity } {
    const generated = generateAccessKey(randomBytes);
    const object = {
      apiVersion: 'management.platform/v1',
      kind: 'OwnedAccessKey',
      metadata: { name: `key-${generated.id}`, creationTimestamp: CREATED },
      spec: { keyId: generated.id, keyHash: hashAccessKey(generated.key, PEPPER), ...spec },
    } as OwnedAccessKey;
    this.putKey(object);
    const result = authenticateAccessKey(generated.key, this.context);
    if (!result.ok) throw new Error(`the key does not authenticate: ${result.failure.message}`);
    return { object, identity: result.identity };
  }
}

export const testUser = (
  name: string,
  spec: Partial<User['spec']> = {},
  labels: Record<string, string> = {},
): User =>
  ({
    apiVersion: 'management.platform/v1',
    kind: 'User',
    metadata: { name, uid: `uid-${name}`, labels },
    spec,
    status: { teams: [] },
  }) as User;

export const testTeam = (name: string, spec: Partial<Team['spec']> = {}): Team =>
  ({
    apiVersion: 'management.platform/v1',
    kind: 'Team',
    metadata: { name, uid: `uid-${name}` },
    spec,
  }) as Team;

import { KUBERNETES_VERBS } from '../../api/meta.ts';
import { type AdmissionDecision, allow, type Cause, invalid } from '../decision.ts';
import type { AdmittedObject } from '../review.ts';
import { subjectOf } from './ownedaccesskey.ts';

/**
 * SharedSecret admission. `spec.access[].verbs` become RBAC Role rules on the Secret, so only
 * Kubernetes verbs (or `*`) make sense; this belongs in the CRD as an enum (see the ADR) and is
 * checked here until the schema carries it. Users and teams that do not exist (yet) are a
 * warning, not a denial: access may be granted ahead of an identity's creation.
 */

const ALLOWED_VERBS: ReadonlySet<string> = new Set([...KUBERNETES_VERBS, '*']);

interface AccessEntry {
  verbs?: unknown;
  users?: unknown;
  teams?: unknown;
}

function accessEntries(object: AdmittedObject): AccessEntry[] {
  const spec = object.spec as { access?: unknown } | undefined;
  return Array.isArray(spec?.access) ? (spec.access as AccessEntry[]) : [];
}

const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];

/** Every user and team named in `spec.access`, for the existence lookup. */
export function namedIdentities(object: AdmittedObject): { users: string[]; teams: string[] } {
  const entries = accessEntries(object);
  return {
    users: [...new Set(entries.flatMap((e) => strings(e.users)))].filter((u) => u !== ''),
    teams: [...new Set(entries.flatMap((e) => strings(e.teams)))].filter((t) => t !== ''),
  };
}

export function validateSharedSecret(
  object: AdmittedObject,
  missing: { users: readonly string[]; teams: readonly string[] },
): AdmissionDecision {
  const causes: Cause[] = [];
  accessEntries(object).forEach((entry, i) => {
    strings(entry.verbs).forEach((verb, j) => {
      if (!ALLOWED_VERBS.has(verb)) {
        causes.push({
          field: `spec.access[${i}].verbs[${j}]`,
          reason: 'FieldValueNotSupported',
          message: `Unsupported value: ${JSON.stringify(verb)}: supported values: "*", ${KUBERNETES_VERBS.map((v) => `"${v}"`).join(', ')}`,
        });
      }
    });
  });
  const warnings = [
    ...missing.users.map(
      (u) => `spec.access: user "${u}" does not exist (yet); the rule applies once it does`,
    ),
    ...missing.teams.map(
      (t) => `spec.access: team "${t}" does not exist (yet); the rule applies once it does`,
    ),
  ];
  return causes.length > 0
    ? invalid(subjectOf(object, 'SharedSecret'), causes, warnings)
    : allow({ warnings });
}

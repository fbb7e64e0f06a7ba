import type { Scope } from '../../api/scope.ts';
import { validateScope } from '../../authz/scope-validation.ts';
import type { Cause } from '../decision.ts';

/**
 * A scope (of an OwnedAccessKey, or any kind that carries one) checked beyond its CRD schema.
 * The schema already refuses unknown role names (enum), `resourceNames` without `resources`
 * (CEL) and malformed non-resource URLs (pattern); `validateScope` repeats those (the gateway
 * uses it for virtual kinds) and adds what a schema cannot say cheaply: overlapping wildcard
 * resources. Deprecated fields become warnings.
 */
export function scopeFindings(scope: unknown, at: string): { causes: Cause[]; warnings: string[] } {
  if (scope === undefined || scope === null) return { causes: [], warnings: [] };
  if (typeof scope !== 'object' || Array.isArray(scope)) {
    return {
      causes: [{ field: at, reason: 'FieldValueInvalid', message: 'must be an object' }],
      warnings: [],
    };
  }
  const { errors, warnings } = validateScope(scope as Scope);
  return {
    causes: errors.map((issue) => ({
      field: `${at}.${issue.path}`,
      reason: issue.path.endsWith('.role') ? 'FieldValueNotSupported' : 'FieldValueInvalid',
      message: issue.message,
    })),
    warnings,
  };
}

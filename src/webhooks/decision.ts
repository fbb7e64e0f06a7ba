import type { FieldCause } from '../api/status.ts';

/**
 * What an admission rule decides, independent of the AdmissionReview wire format. Rules are pure
 * functions returning a {@link AdmissionDecision}; `review.ts` turns it into the response the
 * apiserver reads.
 */

/** One field-level problem: `field` is a path such as `spec.scope.rules[0].resources[1]`. */
export type Cause = FieldCause;

/** An RFC 6902 operation; `path` is a JSON pointer. */
export type JsonPatchOperation =
  | { readonly op: 'add' | 'replace'; readonly path: string; readonly value: unknown }
  | { readonly op: 'remove'; readonly path: string };

/** The `reason` of a denial `Status`, matching the HTTP code as kube-apiserver pairs them. */
export type StatusReason = 'Invalid' | 'Forbidden' | 'AlreadyExists' | 'BadRequest' | 'InternalError';

export interface AdmissionDecision {
  readonly allowed: boolean;
  /** HTTP code of a denial (422, 403, 409, 400, 500); absent when allowed. */
  readonly code?: number;
  readonly reason?: StatusReason;
  readonly message?: string;
  readonly causes: readonly Cause[];
  /** Soft findings; kubectl prints each as `Warning: ...`. */
  readonly warnings: readonly string[];
  /** Mutations, only ever on an allowed decision. */
  readonly patches: readonly JsonPatchOperation[];
}

const ALLOW: AdmissionDecision = Object.freeze({
  allowed: true,
  causes: [],
  warnings: [],
  patches: [],
});

export function allow(extra: { warnings?: readonly string[]; patches?: readonly JsonPatchOperation[] } = {}) {
  return {
    ...ALLOW,
    warnings: extra.warnings ?? [],
    patches: extra.patches ?? [],
  } satisfies AdmissionDecision;
}

/** The object a request is about, for messages: `OwnedAccessKey "k1"`. */
export interface Subject {
  readonly kind: string;
  readonly name: string;
}

/**
 * A 422 Invalid denial whose message reads like kube-apiserver's own validation errors
 * (`Kind "name" is invalid: [field: message, ...]`), so kubectl users see the paths even though
 * kubectl prints only the message; the paths are in `details.causes` for programs.
 */
export function invalid(subject: Subject, causes: readonly Cause[], warnings: readonly string[] = []) {
  const listed = causes.map((c) => `${c.field}: ${c.message}`);
  const body = listed.length === 1 ? listed[0] : `[${listed.join(', ')}]`;
  return {
    allowed: false,
    code: 422,
    reason: 'Invalid',
    message: `${subject.kind} "${subject.name}" is invalid: ${body}`,
    causes,
    warnings,
    patches: [],
  } satisfies AdmissionDecision;
}

export function forbidden(message: string, warnings: readonly string[] = []) {
  return {
    allowed: false,
    code: 403,
    reason: 'Forbidden',
    message,
    causes: [],
    warnings,
    patches: [],
  } satisfies AdmissionDecision;
}

/** The webhook could not decide (a lookup failed): deny, never guess. The message names no secret. */
export function internalError(message: string) {
  return {
    allowed: false,
    code: 500,
    reason: 'InternalError',
    message,
    causes: [],
    warnings: [],
    patches: [],
  } satisfies AdmissionDecision;
}

/**
 * Combines the decisions of several rules on one request: denied when any denies (the first
 * denial's code and reason win; 422 causes are merged into one message), warnings of all rules
 * kept, patches concatenated in order.
 */
export function combine(subject: Subject, decisions: readonly AdmissionDecision[]): AdmissionDecision {
  const warnings = decisions.flatMap((d) => d.warnings);
  const denials = decisions.filter((d) => !d.allowed);
  const first = denials[0];
  if (first === undefined) return allow({ warnings, patches: decisions.flatMap((d) => d.patches) });
  if (first.code === 422) {
    const invalids = denials.filter((d) => d.code === 422);
    return invalid(
      subject,
      invalids.flatMap((d) => d.causes),
      warnings,
    );
  }
  return { ...first, warnings };
}

/** Escapes one JSON pointer token (RFC 6901). */
export function pointerToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** The request itself makes no sense for this webhook (wrong resource for the path). */
export function badRequest(message: string) {
  return {
    allowed: false,
    code: 400,
    reason: 'BadRequest',
    message,
    causes: [],
    warnings: [],
    patches: [],
  } satisfies AdmissionDecision;
}

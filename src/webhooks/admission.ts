import { ApiException } from '@kubernetes/client-node';
import type { ClusterState } from './cluster-state.ts';
import { type AdmissionDecision, allow, combine, internalError } from './decision.ts';
import {
  MUTATING_POLICIES,
  type PolicyChain,
  type PolicyInput,
  type PolicyTable,
  resourceKey,
  SECRET_POLICIES,
  VALIDATING_POLICIES,
} from './policies.ts';
import type { AdmissionRequest } from './review.ts';
import { subjectOf } from './rules/ownedaccesskey.ts';

/**
 * The admission dispatcher: finds the chain of policies for a request (`policies.ts`, by webhook
 * path, resource and operation), lets each gather what it needs through the {@link ClusterState}
 * edge and decide, and combines the decisions. Every lookup failure denies (fail closed) with a
 * message that names no secret.
 */

/** URL paths the server answers; the webhook configurations point at them. */
export const MUTATE_PATH = '/mutate';
export const VALIDATE_PATH = '/validate';
export const VALIDATE_SECRETS_PATH = '/validate-secrets';

/**
 * The policy table each path serves. A resource missing from a validating table was misrouted;
 * one missing from the mutating table needs no mutation.
 */
const WEBHOOKS: Readonly<Record<string, { readonly policies: PolicyTable; readonly mutating: boolean }>> = {
  [MUTATE_PATH]: { policies: MUTATING_POLICIES, mutating: true },
  [VALIDATE_PATH]: { policies: VALIDATING_POLICIES, mutating: false },
  [VALIDATE_SECRETS_PATH]: { policies: SECRET_POLICIES, mutating: false },
};

/** The paths {@link Admission.review} answers. */
export const ADMISSION_PATHS: readonly string[] = Object.keys(WEBHOOKS);

/** A request was not for a path, resource or operation this webhook serves. */
export class UnexpectedAdmissionRequest extends Error {
  override readonly name = 'UnexpectedAdmissionRequest';
}

export class Admission {
  constructor(
    private readonly cluster: ClusterState,
    /** Namespace of the platform-config Secret and the pepper Secret. */
    private readonly platformNamespace: string,
  ) {}

  /** Dispatches by path; unknown paths and misrouted resources throw {@link UnexpectedAdmissionRequest}. */
  async review(path: string, request: AdmissionRequest): Promise<AdmissionDecision> {
    const webhook = Object.hasOwn(WEBHOOKS, path) ? WEBHOOKS[path] : undefined;
    if (!webhook) throw new UnexpectedAdmissionRequest(`no webhook at ${path}`);
    const key = resourceKey(request.resource);
    const chains = Object.hasOwn(webhook.policies, key) ? webhook.policies[key] : undefined;
    if (!chains) {
      if (webhook.mutating) return allow();
      throw new UnexpectedAdmissionRequest(`the webhook at ${path} does not review ${key}`);
    }
    const operation = request.operation;
    const chain = operation === 'CONNECT' ? undefined : chains[operation];
    const object = operation === 'DELETE' ? request.oldObject : request.object;
    if (!chain || !object) return allow();
    const input: PolicyInput = {
      request,
      object,
      oldObject: operation === 'UPDATE' ? (request.oldObject ?? undefined) : undefined,
      platformNamespace: this.platformNamespace,
    };
    try {
      return await this.run(chain, input);
    } catch (err) {
      return internalError(`the admission webhook could not decide: ${describeFailure(err)}`);
    }
  }

  /** Every check in order, combined; then, only while admitted, each `onAdmitted` policy. */
  private async run(chain: PolicyChain, input: PolicyInput): Promise<AdmissionDecision> {
    const subject = subjectOf(input.object, input.request.kind.kind);
    const decisions: AdmissionDecision[] = [];
    for (const policy of chain.checks) {
      decisions.push(policy.decide(input, await policy.gather(input, this.cluster)));
    }
    let decided = combine(subject, decisions);
    for (const policy of chain.onAdmitted ?? []) {
      if (!decided.allowed) break;
      decided = combine(subject, [decided, policy.decide(input, await policy.gather(input, this.cluster))]);
    }
    return decided;
  }
}

/** A failure's class and HTTP code, never its body (which could echo request content). */
function describeFailure(err: unknown): string {
  if (err instanceof ApiException) return `the apiserver answered ${err.code}`;
  if (err instanceof Error) return err.name;
  return 'unknown error';
}

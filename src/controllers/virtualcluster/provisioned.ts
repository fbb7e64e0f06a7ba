import { ApiException, type V1RoleBinding } from '@kubernetes/client-node';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import type { VirtualClusterTemplate } from '../../api/virtualclustertemplate.ts';
import type { ProvisionStatus } from '../../provision/provisioner.ts';
import type { Condition } from '../../runtime/conditions.ts';
import { errorReason } from '../../runtime/errors.ts';
import type { EventInput } from '../../runtime/events.ts';
import { PROGRESSING_WITH_RETRY } from '../../runtime/reconcile-conditions.ts';
import type { Converged } from '../../runtime/reconciler.ts';
import type { SyncedKind } from '../../sync/translate.ts';
import { SYNCER_CLUSTER_ROLES } from './identity.ts';

/**
 * The pure decisions of a provisioned VirtualClusterInstance (no `spec.endpoint`; the platform
 * makes its control plane from `spec.templateRef`): its syncer configuration, the `Provisioned`
 * condition from what the provisioner answered, the Event of each phase, and how `Provisioned`
 * joins the registered instance's outcome (`Ready`, `Syncing`).
 */

export const PROVISIONED_CONDITION = 'Provisioned';

/** How soon a provisioned instance whose control plane is not Ready (yet) is looked at again. */
export const PROVISION_RETRY_MS = 5_000;
/**
 * How soon one whose control plane is starting (made or woken, its components not all ready) is:
 * sooner, since it becomes ready within seconds and a request waking it through the access proxy
 * waits for that (a 5 s look left it waiting up to 5 s longer than the control plane took).
 */
export const STARTING_RETRY_MS = 1_000;

/** When a provisioned instance in `state` that is not Ready is looked at again. */
const retryAfterMs = (state: ProvisionedState) =>
  state.reason === 'Starting' ? STARTING_RETRY_MS : PROVISION_RETRY_MS;

/** The longest message of a condition or Event made from a provisioner's error. */
const MAX_MESSAGE = 1000;

/** The syncer configuration of a provisioned instance: its own `spec.config`, else its template's. */
export function provisionedConfigText(
  vci: Pick<VirtualClusterInstance, 'spec'>,
  template: Pick<VirtualClusterTemplate, 'spec'> | undefined,
): string | undefined {
  return vci.spec.config ?? template?.spec.config;
}

/** What provisioning came to in one reconcile. */
export type ProvisionResult =
  /** `spec.templateRef` names no VirtualClusterTemplate (yet: it is watched). */
  | { kind: 'templateNotFound'; template: string }
  /** `provisioner.ensure` threw. */
  | { kind: 'failed'; error: unknown }
  /** `provisioner.ensure` answered. */
  | { kind: 'ensured'; status: ProvisionStatus };

export interface ProvisionedState {
  status: 'True' | 'False';
  reason: 'Provisioned' | 'TemplateNotFound' | 'ProvisionFailed' | 'Starting';
  message: string;
}

/**
 * A provisioner's error in words for a condition or an Event (pure): an apiserver's answer by its
 * code only (its body may quote what was sent, a Secret's data), anything else by its class and
 * message (the provisioners' own errors name a component and how it ended, never key material).
 */
export function provisionFailureMessage(error: unknown): string {
  if (error instanceof ApiException) return `the host apiserver answered ${error.code}`;
  const message = error instanceof Error ? `${errorReason(error)}: ${error.message}` : errorReason(error);
  return message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
}

/**
 * The `Provisioned` condition (pure): True once the control plane is made and started (its
 * components answer their readiness probes), False with `TemplateNotFound`, `ProvisionFailed`
 * (the provisioner failed or a component cannot start) or `Starting` (made, not every component
 * ready yet).
 */
export function provisionedState(result: ProvisionResult): ProvisionedState {
  switch (result.kind) {
    case 'templateNotFound':
      return {
        status: 'False',
        reason: 'TemplateNotFound',
        message: `VirtualClusterTemplate ${result.template} (spec.templateRef) does not exist`,
      };
    case 'failed':
      return { status: 'False', reason: 'ProvisionFailed', message: provisionFailureMessage(result.error) };
    case 'ensured': {
      const { phase, message } = result.status;
      if (phase === 'Ready')
        return { status: 'True', reason: 'Provisioned', message: 'the control plane is made and running' };
      if (phase === 'Failed')
        return {
          status: 'False',
          reason: 'ProvisionFailed',
          message: message ?? 'a component of the control plane cannot start',
        };
      return {
        status: 'False',
        reason: 'Starting',
        message: message ?? 'the control plane is made; not every component is ready yet',
      };
    }
  }
}

/**
 * The Event of a phase (pure), from the `Provisioned` condition before this reconcile and the
 * state it came to: `Provisioning` when work on a control plane not made before begins,
 * `Provisioned` when it becomes True, `ProvisionFailed` (Warning) when it fails with a new message.
 * Undefined: nothing new to tell (the recorder folds repeats anyway).
 */
export function provisionEvent(
  before: Pick<Condition, 'status' | 'reason' | 'message'> | undefined,
  after: ProvisionedState,
): EventInput | undefined {
  const action = 'Provision';
  if (after.status === 'True')
    return before?.status === 'True'
      ? undefined
      : { type: 'Normal', reason: 'Provisioned', action, note: after.message };
  if (after.reason === 'ProvisionFailed')
    return before?.reason === 'ProvisionFailed' && before.message === after.message
      ? undefined
      : { type: 'Warning', reason: 'ProvisionFailed', action, note: after.message };
  return undefined;
}

/** The `Provisioning` Event, recorded before `ensure` when the control plane was not made before. */
export function provisioningEvent(
  before: Pick<Condition, 'status' | 'reason'> | undefined,
): EventInput | undefined {
  if (before?.status === 'True' || before?.reason === 'Starting' || before?.reason === 'ProvisionFailed')
    return undefined;
  return {
    type: 'Normal',
    reason: 'Provisioning',
    action: 'Provision',
    note: 'making the control plane of the virtual cluster',
  };
}

/**
 * The outcome of a provisioned instance whose control plane is not running (pure): `Provisioned`
 * as `state` says, `Ready` False with the same reason, no `Syncing` (no syncer runs), looked at
 * again after {@link STARTING_RETRY_MS} while starting, {@link PROVISION_RETRY_MS} otherwise, unless
 * only a template can change it (watched).
 */
export function notProvisionedOutcome(state: ProvisionedState): Converged<VirtualClusterInstanceStatus> {
  const retry = state.reason !== 'TemplateNotFound';
  return {
    ready: { status: 'False', reason: state.reason, message: state.message },
    conditions: [{ type: PROVISIONED_CONDITION, ...state }],
    removeConditions: ['Syncing'],
    ...(retry
      ? {
          reconciling: {
            reason: PROGRESSING_WITH_RETRY,
            message: `looking again in ${retryAfterMs(state) / 1000} s`,
          },
          requeueAfter: retryAfterMs(state),
        }
      : {}),
  };
}

/**
 * A provisioned instance's outcome once its control plane runs (pure): the registered instance's
 * outcome (`Ready` from the apiserver's `/readyz` and the syncer, `Syncing`) with `Provisioned`
 * added, and looked at again within {@link STARTING_RETRY_MS} while starting, else
 * {@link PROVISION_RETRY_MS}, while not Ready.
 */
export function withProvisioned(
  outcome: Converged<VirtualClusterInstanceStatus>,
  state: ProvisionedState,
): Converged<VirtualClusterInstanceStatus> {
  const requeueAfter =
    outcome.ready.status === 'True' || outcome.requeueAfter === undefined
      ? outcome.requeueAfter
      : Math.min(outcome.requeueAfter, retryAfterMs(state));
  return {
    ...outcome,
    conditions: [...(outcome.conditions ?? []), { type: PROVISIONED_CONDITION, ...state }],
    ...(requeueAfter !== undefined ? { requeueAfter } : {}),
  };
}

const KIND_OF_ROLE = new Map(
  Object.entries(SYNCER_CLUSTER_ROLES).map(([kind, role]) => [role, kind as SyncedKind]),
);

/**
 * Where an instance's syncer may have written on the host (pure): each (namespace, kind) one of
 * its RoleBindings allows; what its deletion lists and deletes.
 */
export function syncedPlaces(bindings: readonly V1RoleBinding[]): { namespace: string; kind: SyncedKind }[] {
  return bindings.flatMap((binding) => {
    const kind = KIND_OF_ROLE.get(binding.roleRef.name);
    const namespace = binding.metadata?.namespace;
    return kind && namespace ? [{ namespace, kind }] : [];
  });
}

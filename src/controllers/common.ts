import type { KubeConfig } from '@kubernetes/client-node';
import { GROUP_AUTHENTICATED, userGroup as platformUserGroup, teamGroup } from '../identity/groups.ts';
import type { Provisioner } from '../provision/provisioner.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Controller, Reconciler } from '../runtime/controller.ts';
import type { EventRecorder } from '../runtime/events.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import type { Manager } from '../runtime/manager.ts';
import type { IdentityProvidersFactory } from './identityrefresh/providers.ts';

/** What every controller's setup gets from the operator. */
export interface ControllerDeps {
  /** The host cluster, writes fenced by leadership. */
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
  maxConcurrentReconciles?: number;
  /** Watch only this namespace (a namespace-scoped install, or tests); all namespaces when absent. */
  namespace?: string;
  /** The platform's own namespace (configuration, keys); `platform-system` when absent. */
  platformNamespace?: string;
  /**
   * The controller's kubeconfig, for its cluster (server, TLS) only: clients that act as another
   * identity (a syncer's ServiceAccount) are built from it with their own credentials.
   */
  kubeConfig?: KubeConfig;
  /**
   * The sign-in connectors, for the identity refresh controller (which cannot run without them):
   * sign-in implements them and the composition root sets them, so controllers never import login.
   */
  identityProviders?: IdentityProvidersFactory;
  /**
   * What makes the VirtualClusterInstances without `spec.endpoint` (`--provisioner`): the
   * virtualcluster controller provisions none when absent.
   */
  provisioner?: Provisioner;
}

export const DEFAULT_PLATFORM_NAMESPACE = 'platform-system';

/** What every reconciler gets from the operator: the host cluster (writes fenced), the clock, Events. */
export type ReconcilerDeps = Pick<ControllerDeps, 'api' | 'clock' | 'events'>;

export function reconcilerDeps(deps: ControllerDeps): ReconcilerDeps {
  return { api: deps.api, clock: deps.clock, events: deps.events };
}

/** The informer selector of namespaced kinds: the namespace the controllers watch, or every one. */
export function watchScope(deps: ControllerDeps): { namespace?: string } {
  return deps.namespace ? { namespace: deps.namespace } : {};
}

/**
 * Adds the controller `name` to the manager, with `workers` workers unless the operator sets how
 * many (`maxConcurrentReconciles`).
 */
export function addController(
  manager: Manager,
  deps: ControllerDeps,
  options: { name: string; workers: number; reconcile: Reconciler; needLeaderElection?: boolean },
): Controller {
  return manager.controller({
    name: options.name,
    ...(options.needLeaderElection === undefined ? {} : { needLeaderElection: options.needLeaderElection }),
    maxConcurrentReconciles: deps.maxConcurrentReconciles ?? options.workers,
    reconcile: options.reconcile,
  });
}

/**
 * The group RoleBindings name for a platform user (`*`: every authenticated identity); the names
 * are src/identity/groups.ts's.
 */
export const userGroup = (user: string) => (user === '*' ? GROUP_AUTHENTICATED : platformUserGroup(user));
export { teamGroup };

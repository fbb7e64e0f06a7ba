import type { Manager } from '../runtime/manager.ts';
import { setupAccessKeyController } from './accesskey/setup.ts';
import { setupClusterController } from './cluster/setup.ts';
import type { ControllerDeps } from './common.ts';
import { setupIdentityRefreshController } from './identityrefresh/setup.ts';
import { setupProjectController } from './project/setup.ts';
import { setupSecretSyncController } from './secretsync/setup.ts';
import { setupSharedSecretController } from './sharedsecret/setup.ts';
import { setupTeamMembershipController } from './teammembership/setup.ts';
import { setupVirtualClusterController } from './virtualcluster/setup.ts';

/** Every controller the operator can run, by the name its flags use. */
export const controllerSetups = {
  sharedsecret: setupSharedSecretController,
  secretsync: setupSecretSyncController,
  accesskey: setupAccessKeyController,
  project: setupProjectController,
  teammembership: setupTeamMembershipController,
  virtualcluster: setupVirtualClusterController,
  cluster: setupClusterController,
  identityrefresh: (manager: Manager, deps: ControllerDeps) => setupIdentityRefreshController(manager, deps),
} satisfies Record<string, (manager: Manager, deps: ControllerDeps) => unknown>;

export type ControllerName = keyof typeof controllerSetups;
export const CONTROLLER_NAMES = Object.keys(controllerSetups) as ControllerName[];
export type { ControllerDeps };

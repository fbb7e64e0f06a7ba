import pino from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { IDENTITY_REFRESHED_CONDITION } from '../../../src/controllers/identityrefresh/desired.ts';
import { setupIdentityRefreshController } from '../../../src/controllers/identityrefresh/setup.ts';
import { loginIdentityProviders } from '../../../src/login/identity-refresh.ts';
import { systemClock } from '../../../src/runtime/clock.ts';
import { EventRecorder } from '../../../src/runtime/events.ts';
import { KubeClient } from '../../../src/runtime/kube-client.ts';
import { Manager } from '../../../src/runtime/manager.ts';
import type { LoginEnv, StoredKey } from './login-env.ts';

/**
 * The identity refresh controller on a manager of its own (as the controller component runs it),
 * with a short interval, against the login environment's apiserver and providers.
 */
export function useIdentityRefresher(env: () => LoginEnv, intervalMs: number): void {
  let refresher: Manager | undefined;
  beforeAll(async () => {
    const g = env().gateway;
    const api = new KubeClient(g.kc);
    const logger = pino({ level: 'silent' });
    refresher = new Manager({ api, logger });
    setupIdentityRefreshController(
      refresher,
      {
        api,
        clock: systemClock,
        events: new EventRecorder({
          api,
          clock: systemClock,
          logger,
          reportingController: 'management.platform/operator',
          reportingInstance: 'refresh-test',
        }),
        platformNamespace: g.platformNamespace,
        identityProviders: loginIdentityProviders(
          env().providers ? { addresses: env().providers?.addresses } : {},
        ),
      },
      { intervalMs },
    );
    await refresher.start();
  });
  afterAll(async () => {
    await refresher?.stop();
  });
}

/** The `IdentityRefreshed` condition of a stored key. */
export const refreshConditionOf = (key: StoredKey | undefined) =>
  (key?.status?.conditions ?? []).find((c: { type: string }) => c.type === IDENTITY_REFRESHED_CONDITION);

/**
 * The gateway under test, in a process of its own (started by `run.ts` through `fork`), so that
 * neither the load generator nor the benchmark's own bookkeeping share its event loop: the same
 * pieces `platform operator` starts for the gateway (manager with the gateway's informers, no
 * controllers, plain HTTP). Reports `{ url, impersonation }` to the parent once it answers, where
 * `impersonation` are the headers it sends upstream for the benchmark's key (for the direct
 * impersonated baseline). Exits on `stop` (so `--cpu-prof` can write its profile).
 *
 *   argv: KUBECONFIG PLATFORM_NAMESPACE ACCESS_KEY
 */
import pino from 'pino';
import { StatusError } from '../../src/api/status.ts';
import { impersonationHeaders } from '../../src/gateway/proxy/impersonation.ts';
import { gatewayOnly } from '../support.ts';

const [kubeconfig = '', namespace = 'platform-system', accessKey = ''] = process.argv.slice(2);

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' });
  const { manager, gateway } = gatewayOnly(kubeconfig, namespace, logger);
  await manager.start();
  const server = await gateway.start();
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await gateway.stop().catch(() => undefined);
    await manager.stop().catch(() => undefined);
    process.exit(0);
  };
  process.on('message', (message) => {
    if (message === 'stop') void stop();
  });
  process.on('disconnect', () => void stop());
  process.on('SIGTERM', () => void stop());
  for (;;) {
    if (gateway.ready()) {
      const result = gateway.authenticator.authenticateCached(accessKey);
      if (result.ok) {
        const impersonation = impersonationHeaders(result.identity);
        if (impersonation instanceof StatusError) throw impersonation;
        process.send?.({ url: server.url, impersonation });
        return;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});

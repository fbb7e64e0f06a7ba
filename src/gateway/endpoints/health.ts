import type { Endpoint } from '../../http/endpoint.ts';

/**
 * `/healthz`, `/livez` and `/readyz`, at the root and under the management API's base path,
 * without authentication (probes have no key). Metrics are not here: they are served on the
 * health port with the rest of the process's metrics, not on the API port.
 */
export function healthEndpoints(readiness: () => { ready: boolean; notReady: string[] }): Endpoint[] {
  const ok = () => ({ code: 200, body: 'ok', contentType: 'text/plain' });
  const ready = () => {
    const report = readiness();
    return report.ready
      ? ok()
      : {
          code: 503,
          body: `not ready:\n${report.notReady.map((name) => `- ${name}`).join('\n')}\n`,
          contentType: 'text/plain',
        };
  };
  const at = (path: string, answer: () => ReturnType<typeof ok>): Endpoint[] => [
    {
      name: `health ${path}`,
      route: { kind: 'path', path, methods: ['GET'] },
      authentication: 'none',
      handle: answer,
    },
    {
      name: `health ${path} (management API)`,
      route: { kind: 'nonResource', paths: [path] },
      authentication: 'none',
      handle: answer,
    },
  ];
  return [...at('/healthz', ok), ...at('/livez', ok), ...at('/readyz', ready)];
}

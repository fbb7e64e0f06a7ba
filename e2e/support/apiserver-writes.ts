import type { Cluster } from '../../src/dev/controlplane.ts';

/**
 * Successful write requests the apiserver has served (its own `apiserver_request_total`), leaving
 * out the resources in `exclude` (for example `events` and `leases`, which are not the work measured).
 */
export async function apiserverWrites(cluster: Cluster, exclude: readonly string[] = []): Promise<number> {
  return apiserverWritesWhere(cluster, (resource) => !exclude.includes(resource));
}

/** Successful write requests the apiserver has served to the resources `counted` accepts. */
export async function apiserverWritesWhere(
  cluster: Cluster,
  counted: (resource: string) => boolean,
): Promise<number> {
  const { request } = await import('node:https');
  const text = await new Promise<string>((resolve, reject) => {
    const req = request(
      `${cluster.server}/metrics`,
      { ca: cluster.caPem, headers: { authorization: `Bearer ${cluster.adminToken}` } },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString();
        });
        res.on('end', () => resolve(body));
      },
    );
    req.on('error', reject);
    req.end();
  });
  return text
    .split('\n')
    .filter(
      (line) =>
        line.startsWith('apiserver_request_total{') && /verb="(POST|PUT|PATCH|APPLY|DELETE)"/.test(line),
    )
    .filter((line) => /code="2\d\d"/.test(line) && counted(/resource="([^"]*)"/.exec(line)?.[1] ?? ''))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

import { createServer } from 'node:net';

/**
 * Ports on 127.0.0.1 for the processes of a local control plane. A port found free may be taken
 * a moment later by someone else: a process that cannot bind it fails with "address already in
 * use", and its starter picks again (child-processes.ts `retryWhenPortTaken`).
 */

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** Whether nothing listens on 127.0.0.1:`port` right now (we could bind it). */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A full garbage collection in a Node process a benchmark measures, from outside it, so that its
 * resident memory says what it keeps rather than how much garbage it happened to carry: V8 frees
 * a burst's garbage only when its memory reducer gets round to it, which on a busy machine can
 * be minutes after the burst (bench/scale read an operator 140 MiB above what it kept).
 *
 * The process is started with {@link inspectFlag} (the inspector listening on loopback, no session
 * attached until now, so nothing else changes); {@link collectGarbage} attaches, asks the heap
 * profiler for a collection (a full, compacting one), waits for its answer and detaches. The
 * product needs no flag or endpoint of its own for it.
 */
import { freePort } from '../src/dev/controlplane.ts';
import { type WaitBound, within } from './support.ts';

/** A loopback port for a measured process's inspector, and the Node flag that opens it there. */
export async function inspectFlag(): Promise<{ port: number; flag: string }> {
  const port = await freePort();
  return { port, flag: `--inspect=127.0.0.1:${port}` };
}

/** Runs a full garbage collection in the process whose inspector listens on `port`; bounded by `bound`. */
export async function collectGarbage(port: number, bound: WaitBound): Promise<void> {
  await within(collect(port), `a garbage collection in the process inspected on port ${port}`, bound);
}

async function collect(port: number): Promise<void> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    webSocketDebuggerUrl?: string;
  }[];
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on port ${port}`);
  const socket = new WebSocket(url);
  try {
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve(), { once: true });
      socket.addEventListener('error', () => reject(new Error(`inspector on port ${port}: cannot connect`)), {
        once: true,
      });
    });
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('message', (event) => {
        const message = JSON.parse(String(event.data)) as { id?: number; error?: { message: string } };
        if (message.id !== 1) return;
        if (message.error) reject(new Error(`HeapProfiler.collectGarbage: ${message.error.message}`));
        else resolve();
      });
      socket.addEventListener('close', () => reject(new Error(`inspector on port ${port}: closed`)), {
        once: true,
      });
      socket.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' }));
    });
  } finally {
    socket.close();
  }
}

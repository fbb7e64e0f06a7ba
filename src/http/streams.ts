import type { Readable, Writable } from 'node:stream';

/**
 * Reads `body` until it ends (`complete`) or more than `limit` bytes came (then the stream is
 * paused, its remaining data still to be read).
 */
export function readUpTo(body: Readable, limit: number): Promise<{ chunks: Buffer[]; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (complete: boolean) => {
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      resolve({ chunks, complete });
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size > limit) {
        body.pause();
        done(false);
      }
    };
    const onEnd = () => done(true);
    const onError = (error: Error) => {
      body.off('data', onData);
      body.off('end', onEnd);
      reject(error);
    };
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onError);
  });
}

/**
 * `source` into `destination` until the source ends; rejects (and destroys both) when either
 * fails or the destination closes first (the client went away). Unlike `stream.pipeline` it makes
 * no AbortController and no DOMException per call, which every relayed answer would pay.
 */
export function pump(source: Readable, destination: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      source.off('error', onError);
      destination.off('error', onError);
      destination.off('close', onClose);
      destination.off('finish', onFinish);
    };
    const onError = (error: Error) => {
      cleanup();
      source.destroy();
      destination.destroy();
      reject(error);
    };
    const onClose = () => onError(new Error('the destination closed before the end'));
    const onFinish = () => {
      cleanup();
      resolve();
    };
    source.once('error', onError);
    destination.once('error', onError);
    destination.once('close', onClose);
    destination.once('finish', onFinish);
    source.pipe(destination);
    source.resume();
  });
}

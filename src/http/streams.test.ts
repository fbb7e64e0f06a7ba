import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { pump, readUpTo } from './streams.ts';

const collect = () => {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  return { sink, text: () => Buffer.concat(chunks).toString() };
};

describe('readUpTo', () => {
  it('reads a short body whole', async () => {
    const body = new PassThrough();
    body.end('hello');
    const read = await readUpTo(body, 10);
    expect(read.complete).toBe(true);
    expect(Buffer.concat(read.chunks).toString()).toBe('hello');
  });

  it('stops past the limit and leaves the rest to read', async () => {
    const body = new PassThrough();
    body.write('0123456789');
    body.write('abcdef');
    const read = await readUpTo(body, 12);
    expect(read.complete).toBe(false);
    body.end('XYZ');
    const { sink, text } = collect();
    await pump(body, sink);
    expect(Buffer.concat(read.chunks).toString() + text()).toBe('0123456789abcdefXYZ');
  });

  it('rejects when the body fails', async () => {
    const body = new PassThrough();
    const reading = readUpTo(body, 100);
    body.destroy(new Error('broken'));
    await expect(reading).rejects.toThrow('broken');
  });
});

describe('pump', () => {
  it('resolves when the destination has everything', async () => {
    const source = new PassThrough();
    const { sink, text } = collect();
    const pumping = pump(source, sink);
    source.write('a');
    source.end('b');
    await pumping;
    expect(text()).toBe('ab');
  });

  it('destroys the source when the destination closes first (the client went away)', async () => {
    const source = new PassThrough();
    const destination = new PassThrough();
    const pumping = pump(source, destination);
    source.write('a');
    destination.destroy();
    await expect(pumping).rejects.toThrow();
    expect(source.destroyed).toBe(true);
  });

  it('destroys the destination when the source fails', async () => {
    const source = new PassThrough();
    const destination = new PassThrough();
    const pumping = pump(source, destination);
    source.destroy(new Error('upstream broke'));
    await expect(pumping).rejects.toThrow('upstream broke');
    expect(destination.destroyed).toBe(true);
  });
});

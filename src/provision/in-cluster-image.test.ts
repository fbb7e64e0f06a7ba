import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { repoRoot } from '../dev/binaries.ts';
import { CONTROL_PLANE_BINARY } from './in-cluster-image.ts';

/** The Dockerfile's instructions, line continuations joined, comments dropped. */
function instructions(text: string): string[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** Each build stage: its base image, its name (`AS name`) and its instructions after FROM. */
function stages(lines: string[]): Array<{ from: string; name?: string; body: string[] }> {
  const result: Array<{ from: string; name?: string; body: string[] }> = [];
  for (const line of lines) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from) result.push({ from: from[1]!, name: from[2], body: [] });
    else result.at(-1)?.body.push(line);
  }
  return result;
}

describe('the platform image carries the control-plane binary the in-cluster provisioner runs', () => {
  const dockerfile = stages(instructions(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8')));
  const builder = dockerfile.find((stage) =>
    stage.body.some((line) => line.includes('hack/controlplane/build.sh')),
  );

  test('a stage builds it with hack/controlplane/build.sh (the flags and versions of `make dev` and the tests)', () => {
    expect(builder?.name).toBeDefined();
  });

  test('the final stage copies that stage’s binary to CONTROL_PLANE_BINARY', () => {
    const final = dockerfile.at(-1)!;
    expect(final.name).toBeUndefined();
    const copies = final.body
      .map((line) => /^COPY\s+--from=(\S+)\s+(\S+)\s+(\S+)$/i.exec(line))
      .filter((match) => match !== null)
      .filter((match) => match[1] === builder?.name);
    expect(copies.map((match) => match[3])).toEqual([CONTROL_PLANE_BINARY]);
    // What the builder stage installed is what is copied.
    expect(builder?.body.some((line) => line.includes(copies[0]![2]!))).toBe(true);
  });

  test('the Go image is the Go of hack/controlplane/go.mod', () => {
    const goMod = readFileSync(join(repoRoot, 'hack/controlplane/go.mod'), 'utf8');
    const [major, minor] = /^go (\d+)\.(\d+)/m.exec(goMod)!.slice(1);
    const goImage = /^ARG GO_IMAGE=golang:(\d+)\.(\d+)\b/m.exec(
      readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'),
    );
    expect(goImage?.slice(1)).toEqual([major, minor]);
    expect(builder?.from).toMatch(/^\$\{GO_IMAGE\}$/);
  });

  test('.dockerignore lets the control-plane module into the build context', () => {
    const ignore = readFileSync(join(repoRoot, '.dockerignore'), 'utf8').split('\n');
    expect(ignore).toContain('!hack/controlplane/');
  });
});

import { describe, expect, it } from 'vitest';
import {
  cgroupMemoryLimitBytes,
  defaultSandboxMemoryBudgetMiB,
  MEMORY_BUDGET_ENV,
  processBudgetMiB,
  processMemoryBytes,
} from './memory-budget.ts';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
/** What cgroup v1 says for "no limit". */
const V1_UNLIMITED = '9223372036854771712\n';

/** A reader of these files only (every other path is absent), recording what was asked. */
function files(contents: Record<string, string>) {
  const asked: string[] = [];
  const read = (path: string) => {
    asked.push(path);
    return contents[path];
  };
  return { read, asked };
}

describe("the sandbox memory budget follows the container's memory limit", () => {
  it('cgroup v2 in a container (its own cgroup namespace): memory.max at the mount point', () => {
    const { read } = files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': '1073741824\n' });
    expect(cgroupMemoryLimitBytes(read)).toBe(GiB);
    // The chart's controller: 1 GiB of a 64 GiB node; a quarter of the container's, not the node's.
    expect(processMemoryBytes({ totalBytes: 64 * GiB, read })).toBe(GiB);
    expect(processBudgetMiB({}, processMemoryBytes({ totalBytes: 64 * GiB, read }))).toBe(256);
  });

  it('cgroup v2 without `max`: no limit, the machine decides', () => {
    const { read } = files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': 'max\n' });
    expect(cgroupMemoryLimitBytes(read)).toBeUndefined();
    expect(processMemoryBytes({ totalBytes: 2 * GiB, read })).toBe(2 * GiB);
  });

  it("cgroup v2 seen from the host's namespace: the process's cgroup and its ancestors, the smallest", () => {
    const { read, asked } = files({
      '/proc/self/cgroup': '0::/kubepods.slice/pod-a/ctr-b\n',
      '/sys/fs/cgroup/kubepods.slice/pod-a/ctr-b/memory.max': 'max\n',
      '/sys/fs/cgroup/kubepods.slice/pod-a/memory.max': `${512 * MiB}\n`,
      '/sys/fs/cgroup/kubepods.slice/memory.max': `${8 * GiB}\n`,
    });
    expect(cgroupMemoryLimitBytes(read)).toBe(512 * MiB);
    expect(asked).toContain('/sys/fs/cgroup/memory.max');
  });

  it("cgroup v1: memory.limit_in_bytes of the process's memory cgroup, or of the mount point", () => {
    // The container sees its own cgroup at the mount point; the host's path does not exist there.
    const mountPoint = files({
      '/proc/self/cgroup': '12:pids:/kubepods/pod-a/ctr-b\n4:memory:/kubepods/pod-a/ctr-b\n',
      '/sys/fs/cgroup/memory/memory.limit_in_bytes': `${GiB}\n`,
    });
    expect(cgroupMemoryLimitBytes(mountPoint.read)).toBe(GiB);
    const nested = files({
      '/proc/self/cgroup': '4:memory,hugetlb:/process_api/abc\n',
      '/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes': `${768 * MiB}\n`,
      '/sys/fs/cgroup/memory/memory.limit_in_bytes': V1_UNLIMITED,
    });
    expect(cgroupMemoryLimitBytes(nested.read)).toBe(768 * MiB);
    expect(
      defaultSandboxMemoryBudgetMiB(processMemoryBytes({ totalBytes: 24 * GiB, read: nested.read })),
    ).toBe(192);
  });

  it("cgroup v1's 'no limit' is no limit", () => {
    const { read } = files({
      '/proc/self/cgroup': '4:memory:/\n',
      '/sys/fs/cgroup/memory/memory.limit_in_bytes': V1_UNLIMITED,
    });
    expect(cgroupMemoryLimitBytes(read)).toBeUndefined();
    expect(processMemoryBytes({ totalBytes: 4 * GiB, read })).toBe(4 * GiB);
  });

  it('both hierarchies (hybrid): the smaller limit', () => {
    const { read } = files({
      '/proc/self/cgroup': '0::/\n4:memory:/\n',
      '/sys/fs/cgroup/memory.max': `${2 * GiB}\n`,
      '/sys/fs/cgroup/memory/memory.limit_in_bytes': `${GiB}\n`,
    });
    expect(cgroupMemoryLimitBytes(read)).toBe(GiB);
  });

  it('no cgroup files at all (not Linux, no /sys): the machine', () => {
    const { read } = files({});
    expect(cgroupMemoryLimitBytes(read)).toBeUndefined();
    expect(processMemoryBytes({ totalBytes: 16 * GiB, read })).toBe(16 * GiB);
    expect(defaultSandboxMemoryBudgetMiB(processMemoryBytes({ totalBytes: 16 * GiB, read }))).toBe(1024);
  });

  it('a limit above the machine: the machine', () => {
    const { read } = files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': `${64 * GiB}\n` });
    expect(processMemoryBytes({ totalBytes: 2 * GiB, read })).toBe(2 * GiB);
  });

  it('the environment still overrides the default, whatever the limit', () => {
    const { read } = files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': `${GiB}\n` });
    const memory = processMemoryBytes({ totalBytes: 64 * GiB, read });
    expect(processBudgetMiB({ [MEMORY_BUDGET_ENV]: '96' }, memory)).toBe(96);
    expect(processBudgetMiB({ [MEMORY_BUDGET_ENV]: '0' }, memory)).toBe(256);
  });

  it('a small container still gets the 64 MiB floor', () => {
    const { read } = files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': `${128 * MiB}\n` });
    expect(defaultSandboxMemoryBudgetMiB(processMemoryBytes({ totalBytes: 64 * GiB, read }))).toBe(64);
  });
});

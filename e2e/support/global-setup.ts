import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { ensureControlPlaneBinary } from '../../src/dev/binaries.ts';
import { ControlPlane } from '../../src/dev/controlplane.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin kubeconfig of the run's host cluster (kube-apiserver + kube-controller-manager). */
    hostKubeconfig: string;
    /** The run's etcd, for tests that add clusters under their own prefix. */
    etcdUrl: string;
    /** The multicall control-plane binary. */
    controlPlaneBinary: string;
    /** A kubectl of the control plane's version. */
    kubectl: string;
  }
}

/** Starts one host control plane per test run and tears it down at the end. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const binary = await ensureControlPlaneBinary((line) => process.stderr.write(`${line}\n`));
  const stateDir = mkdtempSync(join(tmpdir(), 'platform-e2e-'));
  const plane = await ControlPlane.start({ stateDir, binary });
  try {
    const host = await plane.startCluster({ name: 'host', controllerManager: true });
    project.provide('hostKubeconfig', host.kubeconfigPath);
    project.provide('etcdUrl', plane.etcdUrl);
    project.provide('controlPlaneBinary', binary);
    project.provide('kubectl', join(dirname(binary), 'kubectl'));
  } catch (err) {
    await plane.stop();
    throw err;
  }
  return async () => {
    await plane.stop();
    rmSync(stateDir, { recursive: true, force: true });
  };
}

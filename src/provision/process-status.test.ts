import { describe, expect, it } from 'vitest';
import { type ComponentObservation, FAILED_AFTER_CRASHES, phaseOf } from './process-status.ts';

const healthy = (name: ComponentObservation['name']): ComponentObservation => ({
  name,
  running: true,
  ready: true,
  crashesInARow: 0,
  logPath: `/logs/${name}.log`,
});

describe('phaseOf', () => {
  it('is Ready when every component answers its probe', () => {
    expect(phaseOf([healthy('etcd'), healthy('kube-apiserver')])).toEqual({ phase: 'Ready' });
  });

  it('is Starting, naming what is not ready or not running, while components come up or restart', () => {
    expect(
      phaseOf([
        healthy('etcd'),
        { ...healthy('kube-apiserver'), ready: false },
        {
          ...healthy('kube-controller-manager'),
          running: false,
          ready: false,
          crashesInARow: 1,
          lastExit: 'was killed by SIGKILL',
        },
      ]),
    ).toEqual({
      phase: 'Starting',
      message: 'kube-apiserver is not ready; kube-controller-manager is not running (was killed by SIGKILL)',
    });
  });

  it('is Failed when a component keeps ending, with how and where its log is', () => {
    const crashing = {
      ...healthy('kube-apiserver'),
      running: false,
      ready: false,
      crashesInARow: FAILED_AFTER_CRASHES,
      lastExit: 'exited with code 1',
    };
    expect(phaseOf([healthy('etcd'), crashing])).toEqual({
      phase: 'Failed',
      message: `kube-apiserver ended ${FAILED_AFTER_CRASHES} times in a row (last exited with code 1; log /logs/kube-apiserver.log)`,
    });
    // Once it answers its probe again it is not failing, whatever it went through.
    expect(phaseOf([healthy('etcd'), { ...crashing, running: true, ready: true }])).toEqual({
      phase: 'Ready',
    });
  });
});

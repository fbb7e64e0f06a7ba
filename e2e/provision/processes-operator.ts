import { KubeConfig } from '@kubernetes/client-node';
import { ProcessesProvisioner } from '../../src/provision/processes.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';

/**
 * An operator process for e2e/provision/processes.test.ts to kill with SIGKILL: it provisions one
 * instance with the processes provisioner, prints `READY <endpoint>` and waits to be killed.
 * Usage: node --import tsx processes-operator.ts <stateDir> <binary> <hostKubeconfig> <namespace> <name>
 */

const [stateDir, binary, kubeconfig, namespace, name] = process.argv.slice(2);
if (!stateDir || !binary || !kubeconfig || !namespace || !name) {
  process.stderr.write(
    'usage: processes-operator.ts <stateDir> <binary> <hostKubeconfig> <namespace> <name>\n',
  );
  process.exit(2);
}
const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
const provisioner = new ProcessesProvisioner({ stateDir, binary, api: new KubeClient(kc) });
const status = await provisioner.ensure({ namespace, name }, { controllerManager: false });
process.stdout.write(`${status.phase === 'Ready' ? 'READY' : 'NOT-READY'} ${status.endpoint ?? ''}\n`);
setInterval(() => {}, 60_000);

import { LAST_ACTIVITY_ANNOTATION } from '../../src/api/labels.ts';
import type { Stored } from '../../src/api/resources.ts';
import { resources } from '../../src/api/resources.ts';
import type { VirtualClusterInstance } from '../../src/api/virtualclusterinstance.ts';
import type { KubeClient } from '../../src/runtime/kube-client.ts';
import { objectPath } from '../../src/runtime/kube-client.ts';

/**
 * The controller's side of sleep mode played by a test (the issue 27 contract), on a real
 * apiserver through the status subresource, with admin credentials: an instance's conditions set
 * as the virtualcluster controller sets them asleep and awake, and its last-activity annotation
 * read back. For tests of the gateway's side alone (e2e/access-proxy/wake*.test.ts,
 * e2e/security/sleep-wake.test.ts): what the gateway does for an instance in a given state.
 */

type Instance = Stored<VirtualClusterInstance>;

const pathOf = (namespace: string, name: string) =>
  objectPath(resources.virtualClusterInstances, namespace, name);
/** A status time: whole seconds, as metav1.Time. */
const statusTime = (at: Date) => at.toISOString().replace(/\.\d{3}Z$/, 'Z');

export function readInstance(admin: KubeClient, namespace: string, name: string): Promise<Instance> {
  return admin.request<Instance>({ method: 'GET', path: pathOf(namespace, name) });
}

/** The instance's `sleepmode.platform/last-activity`, if any. */
export async function lastActivity(
  admin: KubeClient,
  namespace: string,
  name: string,
): Promise<string | undefined> {
  return (await readInstance(admin, namespace, name)).metadata.annotations?.[LAST_ACTIVITY_ANNOTATION];
}

async function writeStatus(
  admin: KubeClient,
  namespace: string,
  name: string,
  status: unknown,
): Promise<Instance> {
  return admin.request<Instance>({
    method: 'PATCH',
    path: `${pathOf(namespace, name)}/status`,
    contentType: 'application/merge-patch+json',
    body: { status },
  });
}

/** As the controller leaves an instance it put to sleep at `since`: Sleeping=True, Ready=False, sleepingSince. */
export function markAsleep(
  admin: KubeClient,
  namespace: string,
  name: string,
  since: Date,
): Promise<Instance> {
  const at = statusTime(since);
  return writeStatus(admin, namespace, name, {
    sleepingSince: at,
    conditions: [
      { type: 'Provisioned', status: 'True', reason: 'Provisioned', message: '', lastTransitionTime: at },
      { type: 'Ready', status: 'False', reason: 'Sleeping', message: 'asleep', lastTransitionTime: at },
      { type: 'Sleeping', status: 'True', reason: 'Inactive', message: 'asleep', lastTransitionTime: at },
    ],
  });
}

/**
 * As the controller leaves an instance it woke at `wokeAt` (asleep since `since`) while its control
 * plane starts: Sleeping=False from `wokeAt`, Ready still False from `since`.
 */
export function markWaking(
  admin: KubeClient,
  namespace: string,
  name: string,
  since: Date,
  wokeAt: Date,
): Promise<Instance> {
  const [slept, woke] = [statusTime(since), statusTime(wokeAt)];
  return writeStatus(admin, namespace, name, {
    sleepingSince: null,
    conditions: [
      { type: 'Provisioned', status: 'True', reason: 'Provisioned', message: '', lastTransitionTime: slept },
      { type: 'Ready', status: 'False', reason: 'Starting', message: '', lastTransitionTime: slept },
      { type: 'Sleeping', status: 'False', reason: 'Awake', message: '', lastTransitionTime: woke },
    ],
  });
}

/** As the controller leaves an instance awake and ready since `at`: Sleeping=False, Ready=True. */
export function markAwake(admin: KubeClient, namespace: string, name: string, at: Date): Promise<Instance> {
  const time = statusTime(at);
  return writeStatus(admin, namespace, name, {
    sleepingSince: null,
    conditions: [
      { type: 'Provisioned', status: 'True', reason: 'Provisioned', message: '', lastTransitionTime: time },
      { type: 'Ready', status: 'True', reason: 'Ready', message: '', lastTransitionTime: time },
      { type: 'Sleeping', status: 'False', reason: 'Awake', message: '', lastTransitionTime: time },
    ],
  });
}

/** Removes the last-activity annotation (a test's fresh start). */
export async function clearLastActivity(admin: KubeClient, namespace: string, name: string): Promise<void> {
  await admin.request({
    method: 'PATCH',
    path: pathOf(namespace, name),
    contentType: 'application/merge-patch+json',
    body: { metadata: { annotations: { [LAST_ACTIVITY_ANNOTATION]: null } } },
  });
}

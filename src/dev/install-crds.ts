import {
  ApiextensionsV1Api,
  type KubeConfig,
  KubernetesObjectApi,
  loadYaml,
  PatchStrategy,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { renderCrds } from '../api/crd.ts';
import { fieldManagers } from '../runtime/field-managers.ts';

const FIELD_MANAGER = fieldManagers.crds;
const ESTABLISHED_TIMEOUT_MS = 60_000;

/**
 * Applies every generated CRD (server-side apply, so concurrent callers and reruns converge)
 * and waits until each is Established and its names are accepted.
 */
export async function installCrds(kc: KubeConfig): Promise<void> {
  const objects = kc.makeApiClient(KubernetesObjectApi);
  const extensions = kc.makeApiClient(ApiextensionsV1Api);
  const names: string[] = [];
  for (const text of renderCrds().values()) {
    // Loaded into client-node's typed model: its serializer writes only model attributes, so a
    // plain object would lose `enum` and `x-kubernetes-*` keys on the way out.
    const crd = loadYaml<V1CustomResourceDefinition>(text);
    await objects.patch(crd, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
    names.push(crd.metadata!.name!);
  }
  const deadline = Date.now() + ESTABLISHED_TIMEOUT_MS;
  for (const name of names) {
    for (;;) {
      const crd = await extensions.readCustomResourceDefinition({ name });
      const conditions = crd.status?.conditions ?? [];
      const holds = (type: string) => conditions.some((c) => c.type === type && c.status === 'True');
      if (holds('Established') && holds('NamesAccepted')) break;
      if (Date.now() > deadline) {
        throw new Error(`CRD ${name} not established: ${JSON.stringify(conditions)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

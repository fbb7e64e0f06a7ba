import type { KubeConfig } from '@kubernetes/client-node';
import { installCrds as installCrdsOnly } from '../../src/dev/install-crds.ts';
import { installPlatformRoles } from '../../src/dev/install-rbac.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';

/**
 * What the chart installs cluster-wide besides its components, as `platform dev` does: the CRDs
 * (established when this returns) and the ClusterRoles (project roles; the roles a virtual
 * cluster's syncer is bound to, without which no syncer may write).
 */
export async function installCrds(kc: KubeConfig): Promise<void> {
  await installCrdsOnly(kc);
  const api = new KubeClient(kc);
  try {
    await installPlatformRoles(api);
  } finally {
    api.close();
  }
}

/**
 * A CRD that knows only the kind (any content is kept): stands in for another project's CRD
 * (cert-manager, the Prometheus Operator) when only kind, scope and metadata are checked.
 */
export function kindOnlyCrd(group: string, kind: string, plural: string) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
}

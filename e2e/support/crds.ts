export { installCrds } from '../../src/dev/install-crds.ts';

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

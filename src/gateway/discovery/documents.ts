import { API_GROUP, API_VERSION, GROUP_VERSION } from '../../api/meta.ts';
import { KINDS, type KindInfo } from '../../api/registry.ts';

/**
 * Discovery documents of the management API (legacy, unaggregated discovery, which every kubectl
 * falls back to when the answer is plain `application/json`), pure. With a kubeconfig whose server
 * is `<base_url>/kubernetes/management`, kubectl reads `/api`, `/apis` and the group version's
 * resource list from here.
 */

export const DISCOVERY_CATEGORY = 'platform';

export interface ApiResource {
  name: string;
  singularName: string;
  namespaced: boolean;
  kind: string;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
}

/** Subresources the gateway answers itself, besides each stored kind's `status`. */
export const EXTRA_SUBRESOURCES: readonly {
  resource: string;
  subresource: string;
  kind: string;
  verbs: string[];
}[] = [
  { resource: 'users', subresource: 'accesskeys', kind: 'UserAccessKeys', verbs: ['get'] },
  { resource: 'teams', subresource: 'accesskeys', kind: 'TeamAccessKeys', verbs: ['get'] },
];

/** The versions of the core group: none is served here. */
export function apiVersions() {
  return { kind: 'APIVersions', versions: [], serverAddressByClientCIDRs: [] };
}

function groupDocument() {
  return {
    name: API_GROUP,
    versions: [{ groupVersion: GROUP_VERSION, version: API_VERSION }],
    preferredVersion: { groupVersion: GROUP_VERSION, version: API_VERSION },
  };
}

export function apiGroupList() {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: [groupDocument()] };
}

export function apiGroup() {
  return { kind: 'APIGroup', apiVersion: 'v1', ...groupDocument() };
}

/**
 * The resources of `management.platform/v1`. `served(kind)` tells whether a virtual kind has a
 * handler (kinds of later issues are left out until they do).
 */
export function apiResourceList(served: (info: KindInfo) => boolean = () => true) {
  const resources: ApiResource[] = [];
  for (const info of KINDS) {
    if (!served(info)) continue;
    const namespaced = info.scope === 'Namespaced';
    if ('subresourceOf' in info && info.subresourceOf) {
      const parent = KINDS.find((kind) => kind.plural === info.subresourceOf?.plural);
      resources.push({
        name: `${info.subresourceOf.plural}/${info.subresourceOf.subresource}`,
        singularName: '',
        namespaced: parent ? parent.scope === 'Namespaced' : namespaced,
        kind: info.kind,
        verbs: [...info.verbs],
      });
      continue;
    }
    resources.push({
      name: info.plural,
      singularName: info.singular,
      namespaced,
      kind: info.kind,
      verbs: [...info.verbs],
      ...(info.shortNames.length > 0 ? { shortNames: [...info.shortNames] } : {}),
      categories: [DISCOVERY_CATEGORY],
    });
    if (info.stored) {
      resources.push({
        name: `${info.plural}/status`,
        singularName: '',
        namespaced,
        kind: info.kind,
        verbs: ['get', 'patch', 'update'],
      });
      for (const extra of EXTRA_SUBRESOURCES.filter((entry) => entry.resource === info.plural)) {
        resources.push({
          name: `${extra.resource}/${extra.subresource}`,
          singularName: '',
          namespaced,
          kind: extra.kind,
          verbs: extra.verbs,
        });
      }
    }
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: GROUP_VERSION, resources };
}

export interface VersionInfo {
  major: string;
  minor: string;
  gitVersion: string;
  gitCommit: string;
  gitTreeState: string;
  buildDate: string;
  goVersion: string;
  compiler: string;
  platform: string;
}

/** `/version`: the platform's version in the shape kubectl expects. */
export function versionInfo(version: string): VersionInfo {
  const [major = '0', minor = '0'] = version.replace(/^v/, '').split('.');
  return {
    major,
    minor,
    gitVersion: version.startsWith('v') ? version : `v${version}`,
    gitCommit: '',
    gitTreeState: '',
    buildDate: '',
    goVersion: `node${process.versions.node}`,
    compiler: 'tsc',
    platform: `${process.platform}/${process.arch}`,
  };
}

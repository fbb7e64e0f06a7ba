import { describe, expect, it } from 'vitest';
import { loadSyncConfig, NAME_PLACEHOLDER } from './config.ts';
import {
  HOST_CLUSTER_NAME,
  namedHostNamespaces,
  placementClaims,
  placementOf,
  placementProblems,
} from './placement.ts';

const projects: Record<string, string> = { 'p-team': 'team', 'p-team-extra': 'team', 'p-other': 'other' };
const projectOf = (namespace: string) => projects[namespace];
const vci = (spec: Record<string, unknown> = {}, namespace = 'p-team') => ({
  metadata: { name: 'dev', namespace },
  spec,
});
const mappings = (byName: Record<string, string>) =>
  loadSyncConfig({ sync: { toHost: { namespaces: { enabled: true, mappings: { byName } } } } });
const clusterRef = (namespace: string, cluster = HOST_CLUSTER_NAME) => ({
  clusterRef: { cluster, namespace, virtualCluster: 'vc' },
});

describe('placementOf', () => {
  it('clusterRef wins, else the instance itself', () => {
    expect(placementOf(vci())).toEqual({ hostNamespace: 'p-team', vclusterName: 'dev' });
    expect(
      placementOf(
        vci({ clusterRef: { cluster: 'c', namespace: 'vc-host', virtualCluster: 'vc1' } }) as never,
      ),
    ).toEqual({ hostNamespace: 'vc-host', vclusterName: 'vc1' });
  });
});

describe('placementProblems', () => {
  it('its own namespace, and another namespace of its project, are fine', () => {
    expect(placementProblems(vci(), null, projectOf)).toEqual([]);
    expect(placementProblems(vci(clusterRef('p-team-extra')), null, projectOf)).toEqual([]);
    // An instance outside any project may still use its own namespace.
    expect(placementProblems(vci({}, 'plain'), null, projectOf)).toEqual([]);
  });

  it.each([
    ['kube-system', 'kube-system'],
    ["another project's namespace", 'p-other'],
    ['a namespace that does not exist', 'nowhere'],
  ])('refuses %s as host namespace, naming spec.clusterRef.namespace', (_, namespace) => {
    expect(placementProblems(vci(clusterRef(namespace)), null, projectOf)).toEqual([
      expect.objectContaining({ field: 'spec.clusterRef.namespace', reason: 'FieldValueForbidden' }),
    ]);
  });

  it('an instance outside any project may not name other namespaces at all', () => {
    expect(placementProblems(vci(clusterRef('p-team'), 'plain'), null, projectOf)).toHaveLength(1);
  });

  it('refuses another cluster, naming spec.clusterRef.cluster', () => {
    expect(placementProblems(vci(clusterRef('p-team', 'prod')), null, projectOf)).toEqual([
      expect.objectContaining({ field: 'spec.clusterRef.cluster', reason: 'FieldValueNotSupported' }),
    ]);
  });

  it('namespace mappings: patterns and namespaces outside the project are refused, each named', () => {
    const problems = placementProblems(
      vci(),
      mappings({ a: 'p-team-extra', b: 'kube-system', 'c-*': 'x-*', d: `${NAME_PLACEHOLDER}-host` }),
      projectOf,
    );
    expect(problems.map((p) => [p.field, p.message.split(':')[0]])).toEqual([
      ['spec.config', 'sync.toHost.namespaces.mappings.byName["c-*"]'],
      ['spec.config', 'sync.toHost.namespaces.mappings.byName["b"]'],
      ['spec.config', 'sync.toHost.namespaces.mappings.byName["d"]'],
    ]);
    expect(problems[2]!.message).toContain('"dev-host"');
  });

  it('mappings are read only when namespace sync is on', () => {
    const off = loadSyncConfig({
      sync: { toHost: { namespaces: { mappings: { byName: { 'a-*': '*' } } } } },
    });
    expect(placementProblems(vci(), off, projectOf)).toEqual([]);
    expect(namedHostNamespaces(vci(), off).map((n) => n.namespace)).toEqual(['p-team']);
  });
});

describe('placementClaims', () => {
  const configured = { config: 'sync: {}', credentialsSecretRef: { name: 'c' } };
  const instance = (name: string, created: string, spec: Record<string, unknown> = {}) => ({
    metadata: { name, namespace: 'p-team', uid: name, creationTimestamp: created },
    spec: { ...configured, ...spec },
  });
  const as = (name: string) => ({
    clusterRef: { cluster: 'local', namespace: 'p-team', virtualCluster: name },
  });

  it('the instance created first keeps a placement; a later one naming the same virtual cluster is refused', () => {
    const first = instance('a', '2026-01-01T00:00:00Z', as('shared'));
    const second = instance('b', '2026-01-02T00:00:00Z', as('shared'));
    const all = [first, second];
    expect(placementClaims(first, all)).toEqual([]);
    expect(placementClaims(second, all)).toEqual([
      expect.objectContaining({ field: 'spec.clusterRef.virtualCluster', reason: 'FieldValueForbidden' }),
    ]);
  });

  it('other names, unsynced instances and instances being deleted claim nothing', () => {
    const later = instance('b', '2026-01-02T00:00:00Z', as('shared'));
    expect(placementClaims(later, [instance('a', '2026-01-01T00:00:00Z', as('other')), later])).toEqual([]);
    const unsynced = { ...instance('a', '2026-01-01T00:00:00Z', as('shared')), spec: as('shared') };
    expect(placementClaims(later, [unsynced, later])).toEqual([]);
    const going = instance('a', '2026-01-01T00:00:00Z', as('shared'));
    expect(
      placementClaims(later, [{ ...going, metadata: { ...going.metadata, deletionTimestamp: 'x' } }, later]),
    ).toEqual([]);
  });
});

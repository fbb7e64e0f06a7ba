import { describe, expect, test } from 'vitest';
import type { Project } from './project.ts';
import { projectNamespaceName, projectOfNamespace, recordedNamespace } from './project-namespace.ts';

const project = (name: string, namespace?: string): Project =>
  ({
    apiVersion: 'management.platform/v1',
    kind: 'Project',
    metadata: { name },
    spec: {},
    ...(namespace !== undefined ? { status: { namespace } } : {}),
  }) as Project;

function lookup(projects: Project[], prefix: string) {
  return {
    byRecordedNamespace: (namespace: string) =>
      projects.filter((p) => recordedNamespace(p).includes(namespace)),
    byName: (name: string) => projects.find((p) => p.metadata.name === name),
    prefix,
  };
}

describe('the namespace of a project', () => {
  test('the recorded namespace, otherwise the prefix configured now', () => {
    expect(projectNamespaceName(project('shop'), 'p-')).toBe('p-shop');
    expect(projectNamespaceName(project('shop'), 'team-')).toBe('team-shop');
    expect(projectNamespaceName(project('shop', 'p-shop'), 'team-')).toBe('p-shop');
    expect(projectNamespaceName(project('shop', ''), 'team-')).toBe('team-shop');
  });
});

describe('the project of a namespace', () => {
  const projects = [project('alpha'), project('beta', 'p-beta'), project('moved', 'team-moved-old')];

  test('without status.namespace: the configured prefix, not p-', () => {
    expect(projectOfNamespace('team-alpha', lookup(projects, 'team-'))).toBe('alpha');
    expect(projectOfNamespace('p-alpha', lookup(projects, 'team-'))).toBeUndefined();
    expect(projectOfNamespace('p-alpha', lookup(projects, 'p-'))).toBe('alpha');
  });

  test('status.namespace wins over the prefix, whatever the prefix is now', () => {
    expect(projectOfNamespace('p-beta', lookup(projects, 'team-'))).toBe('beta');
    expect(projectOfNamespace('team-moved-old', lookup(projects, 'team-'))).toBe('moved');
    // A project with a recorded namespace does not also own <prefix><name>.
    expect(projectOfNamespace('team-moved', lookup(projects, 'team-'))).toBeUndefined();
    expect(projectOfNamespace('team-beta', lookup(projects, 'team-'))).toBeUndefined();
  });

  test('no project: undefined', () => {
    expect(projectOfNamespace('team-', lookup(projects, 'team-'))).toBeUndefined();
    expect(projectOfNamespace('team-gamma', lookup(projects, 'team-'))).toBeUndefined();
    expect(projectOfNamespace('default', lookup(projects, 'team-'))).toBeUndefined();
  });

  test('the index holds recorded namespaces only', () => {
    expect(recordedNamespace(project('alpha'))).toEqual([]);
    expect(recordedNamespace(project('beta', 'p-beta'))).toEqual(['p-beta']);
    expect(recordedNamespace(project('empty', ''))).toEqual([]);
  });
});

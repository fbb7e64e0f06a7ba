import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderCrds } from '../cli/crds.ts';
import { BASE64_PATTERN } from './common.ts';
import { crdSchema, customResourceDefinition } from './crd.ts';
import type { JsonSchema } from './jsonschema.ts';
import { openApiV3ForGroupVersion, schemaName } from './openapi.ts';
import { KINDS, STORED_KINDS } from './registry.ts';

const crdsDir = fileURLToPath(new URL('../../crds/', import.meta.url));

/** Every schema node with its path, depth first. */
function* nodes(schema: JsonSchema, path = ''): Generator<[string, JsonSchema]> {
  yield [path, schema];
  for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, JsonSchema>)) {
    yield* nodes(child, `${path}.${name}`);
  }
  if (schema.items) yield* nodes(schema.items as JsonSchema, `${path}[]`);
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
    yield* nodes(schema.additionalProperties as JsonSchema, `${path}{}`);
  }
}

describe('generated CRDs', () => {
  it('match the committed crds/ directory exactly (run `platform crds` after changing src/api)', () => {
    const rendered = renderCrds();
    const committed = readdirSync(crdsDir).filter((name) => name.endsWith('.yaml'));
    expect(committed.sort()).toEqual([...rendered.keys()].sort());
    for (const [name, text] of rendered) {
      expect(readFileSync(`${crdsDir}${name}`, 'utf8'), name).toBe(text);
    }
  });

  it('exist for exactly the stored kinds, named <plural>.management.platform', () => {
    expect([...renderCrds().keys()].sort()).toEqual(
      [
        'clusters',
        'ownedaccesskeys',
        'projects',
        'sharedsecrets',
        'teams',
        'users',
        'virtualclusterinstances',
        'virtualclustertemplates',
      ].map((plural) => `${plural}.management.platform.yaml`),
    );
    for (const text of renderCrds().values()) {
      const crd = parse(text);
      expect(crd.spec.names.categories).toEqual(['platform']);
      expect(crd.spec.versions).toHaveLength(1);
      expect(crd.spec.versions[0].subresources).toEqual({ status: {} });
    }
  });

  it.each(STORED_KINDS.map((info) => [info.kind, info] as const))(
    '%s has a structural schema',
    (_kind, info) => {
      const schema = crdSchema(info);
      expect(schema.properties).toHaveProperty('metadata', { type: 'object' });
      for (const [path, node] of nodes(schema)) {
        const free = node['x-kubernetes-preserve-unknown-fields'] === true;
        expect(free || typeof node.type === 'string', `${path} has a type`).toBe(true);
        expect(node, `${path} uses only structural keywords`).not.toHaveProperty('propertyNames');
        expect(node, path).not.toHaveProperty('anyOf');
        expect(node, path).not.toHaveProperty('$ref');
        if (node.type === 'object' && path !== '.metadata') {
          expect(
            free || 'properties' in node || 'additionalProperties' in node,
            `${path} keeps its fields`,
          ).toBe(true);
          expect('properties' in node && 'additionalProperties' in node, path).toBe(false);
        }
        if (
          path !== '' &&
          path !== '.metadata' &&
          path !== '.apiVersion' &&
          path !== '.kind' &&
          path !== '.spec' &&
          path !== '.status'
        ) {
          // Every field below the root explains itself in `kubectl explain`, except list items and map values
          // (described by their parent).
          if (!path.endsWith('[]') && !path.endsWith('{}')) {
            expect(
              typeof node.description === 'string' && node.description.length > 0,
              `${path} is described`,
            ).toBe(true);
          }
        }
      }
    },
  );

  it('carries the spec text into SharedSecret descriptions', () => {
    const schema = crdSchema(STORED_KINDS.find((info) => info.kind === 'SharedSecret')!);
    const spec = (schema.properties as Record<string, JsonSchema>).spec!;
    const access = (spec.properties as Record<string, JsonSchema>).access!;
    expect(access.description).toBe(
      'Access rights for users and teams, transformed into Roles and RoleBindings.',
    );
    const users = ((access.items as JsonSchema).properties as Record<string, JsonSchema>).users!;
    expect(users.description).toBe('Users that get the verbs on this secret.');
  });

  it('validates SharedSecret data keys and values inside the CRD', () => {
    const crd = customResourceDefinition(STORED_KINDS.find((k) => k.kind === 'SharedSecret')!);
    const text = JSON.stringify(crd);
    expect(text).toContain("k.matches('^[-._a-zA-Z0-9]+$')");
    const data = (
      (
        crdSchema(STORED_KINDS.find((k) => k.kind === 'SharedSecret')!).properties as Record<
          string,
          JsonSchema
        >
      ).spec!.properties as Record<string, JsonSchema>
    ).data!;
    expect((data.additionalProperties as JsonSchema).pattern).toBe(BASE64_PATTERN.source);
    expect(text).toContain('"maxProperties":256');
  });

  it('keeps access key identity fields immutable with CEL transition rules', () => {
    const info = STORED_KINDS.find((k) => k.kind === 'OwnedAccessKey')!;
    const spec = (crdSchema(info).properties as Record<string, JsonSchema>).spec!;
    const rules = (spec['x-kubernetes-validations'] as { rule: string; fieldPath?: string }[]).map(
      (r) => r.fieldPath,
    );
    expect(rules).toEqual(
      expect.arrayContaining(['.user', '.team', '.subject', '.type', '.keyHash', '.keyId', '.key']),
    );
  });

  it('has the printer columns the issue asks for', () => {
    const columns = (kind: string) =>
      STORED_KINDS.find((k) => k.kind === kind)!
        .printerColumns.filter((c) => !c.priority)
        .map((c) => c.name);
    expect(columns('SharedSecret')).toEqual(['Display Name', 'Keys', 'Ready', 'Age']);
    expect(columns('OwnedAccessKey')).toEqual([
      'User',
      'Team',
      'Type',
      'Disabled',
      'Expires',
      'Last Activity',
      'Ready',
      'Age',
    ]);
    for (const info of STORED_KINDS) expect(info.printerColumns.at(-1)?.name, info.kind).toBe('Age');
    // Every kind whose controller writes Ready shows it.
    for (const kind of [
      'SharedSecret',
      'OwnedAccessKey',
      'User',
      'Project',
      'Cluster',
      'VirtualClusterInstance',
    ])
      expect(columns(kind), kind).toContain('Ready');
  });
});

describe('registry', () => {
  it('knows every kind once, with unique plurals and short names', () => {
    expect(KINDS.map((k) => k.kind)).toEqual([
      'SharedSecret',
      'OwnedAccessKey',
      'User',
      'Team',
      'Project',
      'Cluster',
      'VirtualClusterInstance',
      'VirtualClusterTemplate',
      'DirectClusterEndpointToken',
      'ProjectMembers',
      'VirtualClusterInstanceKubeConfig',
      'Config',
    ]);
    const names = KINDS.filter((k) => !('subresourceOf' in k && k.subresourceOf)).flatMap((k) => [
      k.plural,
      ...k.shortNames,
    ]);
    expect(new Set(names).size).toBe(names.length);
  });
});

describe('OpenAPI v3 document', () => {
  const document = openApiV3ForGroupVersion();
  const schemas = (document.components as { schemas: Record<string, JsonSchema> }).schemas;
  const paths = document.paths as Record<string, Record<string, unknown>>;

  it.each(KINDS.map((k) => [k.kind]))('describes %s with its group-version-kind', (kind) => {
    const schema = schemas[schemaName(kind)]!;
    expect(schema['x-kubernetes-group-version-kind']).toEqual([
      { group: 'management.platform', version: 'v1', kind },
    ]);
    expect(schema.description).toEqual(expect.any(String));
  });

  it('serves the spec paths', () => {
    const base = '/apis/management.platform/v1';
    expect(Object.keys(paths[`${base}/namespaces/{namespace}/sharedsecrets`]!)).toEqual(
      expect.arrayContaining(['get', 'post', 'delete']),
    );
    expect(Object.keys(paths[`${base}/namespaces/{namespace}/sharedsecrets/{name}`]!)).toEqual(
      expect.arrayContaining(['get', 'put', 'patch', 'delete']),
    );
    expect(paths[`${base}/projects/{name}/members`]).toHaveProperty('get');
    expect(paths[`${base}/namespaces/{namespace}/virtualclusterinstances/{name}/kubeconfig`]).toHaveProperty(
      'post',
    );
    expect(paths[`${base}/directclusterendpointtokens`]).toHaveProperty('post');
    expect(paths[`${base}/directclusterendpointtokens`]).not.toHaveProperty('get');
    expect(paths[`${base}/configs/{name}`]).toHaveProperty('get');
    expect(paths[`${base}/configs`]).toHaveProperty('post');
  });

  it('documents the parsed Config with its defaults', () => {
    const status = (schemas[schemaName('Config')]!.properties as Record<string, JsonSchema>).status!;
    const prefix = (status.properties as Record<string, JsonSchema>).projectNamespacePrefix!;
    expect(prefix.default).toBe('p-');
    expect(prefix.description).toBe('Prefix of project namespaces. Default `p-`.');
  });

  it('is plain JSON (every $ref resolves)', () => {
    const text = JSON.stringify(document);
    for (const [, target] of text.matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)) {
      expect(schemas, target).toHaveProperty([target!]);
    }
  });
});

import { describe, expect, it } from 'vitest';
import { API_GROUP, API_VERSION, STORED_KINDS } from './registry.ts';
import { resources } from './resources.ts';

describe('resources', () => {
  it('address every stored kind of the registry at its CRD plural and scope, each once', () => {
    const ours = Object.values(resources).filter((resource) => resource.group === API_GROUP);
    expect(ours.map((resource) => resource.plural).sort()).toEqual(
      STORED_KINDS.map((kind) => kind.plural).sort(),
    );
    for (const kind of STORED_KINDS) {
      expect(ours.find((resource) => resource.plural === kind.plural)).toEqual({
        group: API_GROUP,
        version: API_VERSION,
        plural: kind.plural,
        namespaced: kind.scope === 'Namespaced',
      });
    }
  });
});

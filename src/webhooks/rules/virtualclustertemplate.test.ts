import { describe, expect, it } from 'vitest';
import { validateVirtualClusterTemplate } from './virtualclustertemplate.ts';

const template = (spec: Record<string, unknown>) => ({
  apiVersion: 'management.platform/v1',
  kind: 'VirtualClusterTemplate',
  metadata: { name: 'small' },
  spec,
});
const refused =
  'sync:\n  toHost:\n    endpoints:\n      patches:\n        - path: metadata.annotations\n          expression: "1; evil()"\n';

describe('validateVirtualClusterTemplate', () => {
  it('admits a template without a configuration, and one the syncer accepts', () => {
    expect(validateVirtualClusterTemplate(undefined, template({})).allowed).toBe(true);
    expect(
      validateVirtualClusterTemplate(
        undefined,
        template({ config: 'sync:\n  toHost:\n    services:\n      enabled: true\n' }),
      ).allowed,
    ).toBe(true);
  });

  it('refuses a configuration the syncer refuses, naming the field inside it (422)', () => {
    const decision = validateVirtualClusterTemplate(undefined, template({ config: refused }));
    expect(decision).toMatchObject({ allowed: false, code: 422 });
    expect(decision.causes).toEqual([
      expect.objectContaining({
        field: 'spec.config',
        message: expect.stringMatching(/^sync\.toHost\.endpoints\.patches\[0\]\.expression: /),
      }),
    ]);
  });

  it('does not check an unchanged configuration again', () => {
    expect(
      validateVirtualClusterTemplate(template({ config: refused }), template({ config: refused })).allowed,
    ).toBe(true);
  });
});

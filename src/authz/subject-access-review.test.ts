import { describe, expect, it } from 'vitest';
import { reviewAllowed, subjectAccessReview } from './subject-access-review.ts';

describe('the SubjectAccessReview', () => {
  const attributes = {
    group: 'management.platform',
    version: 'v1',
    resource: 'users',
    name: 'alice',
    verb: 'get',
  };

  it('asks about the user as given, and the resource attributes unchanged', () => {
    const extra = { 'management.platform/access-key': ['key-1'] };
    expect(
      subjectAccessReview({ username: 'alice', uid: 'u-1', groups: ['devs', 'ops'], extra }, attributes),
    ).toEqual({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user: 'alice', uid: 'u-1', groups: ['devs', 'ops'], extra, resourceAttributes: attributes },
    });
  });

  it('leaves out what the user lacks, but always sends groups', () => {
    expect(subjectAccessReview({}, attributes).spec).toEqual({ groups: [], resourceAttributes: attributes });
  });

  it('counts as allowed only an answer that says allowed: true', () => {
    expect(reviewAllowed({ status: { allowed: true } })).toBe(true);
    for (const answer of [undefined, {}, { status: {} }, { status: { allowed: false } }])
      expect(reviewAllowed(answer)).toBe(false);
  });
});

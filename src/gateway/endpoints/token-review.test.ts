import { describe, expect, test } from 'vitest';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import { StatusError } from '../../api/status.ts';
import type { VerifiedDirectToken } from '../../identity/direct-token.ts';
import {
  directTokenReviewDecision,
  parseTokenReview,
  reviewerAllowed,
  reviewTarget,
  scopeAdmitsTarget,
} from './token-review.ts';

/** The namespace of a project that has recorded none: the configured prefix `p-` and its name. */
const prefixed = (project: string) => `p-${project}`;

describe('token review', () => {
  test('targets from the path', () => {
    expect(reviewTarget('/cluster/edge')).toEqual({ kind: 'Cluster', cluster: 'edge' });
    expect(reviewTarget('/project/web/virtualcluster/dev')).toEqual({
      kind: 'VirtualCluster',
      project: 'web',
      virtualCluster: 'dev',
    });
    expect(reviewTarget('/cluster')).toBeInstanceOf(StatusError);
    expect(reviewTarget('/cluster/Edge')).toBeInstanceOf(StatusError);
  });

  test('scopes admit their cluster or virtual cluster only', () => {
    const edge = { kind: 'Cluster', cluster: 'edge' } as const;
    const dev = { kind: 'VirtualCluster', project: 'web', virtualCluster: 'dev' } as const;
    expect(scopeAdmitsTarget(undefined, edge, prefixed)).toBe(true);
    expect(scopeAdmitsTarget({ clusters: [{ cluster: 'edge' }] }, edge, prefixed)).toBe(true);
    expect(scopeAdmitsTarget({ clusters: [{ cluster: '*' }] }, edge, prefixed)).toBe(true);
    expect(scopeAdmitsTarget({ clusters: [{ cluster: 'core' }] }, edge, prefixed)).toBe(false);
    expect(scopeAdmitsTarget({ projects: [{ project: 'web' }] }, dev, prefixed)).toBe(true);
    expect(scopeAdmitsTarget({ projects: [{ project: 'web' }] }, edge, prefixed)).toBe(false);
    expect(
      scopeAdmitsTarget({ virtualClusters: [{ project: 'web', virtualCluster: 'prod' }] }, dev, prefixed),
    ).toBe(false);
    expect(
      scopeAdmitsTarget(
        { rules: [{ requestTargets: ['Cluster'], cluster: 'edge', verbs: ['get'] }] },
        edge,
        prefixed,
      ),
    ).toBe(true);
    expect(scopeAdmitsTarget({ rules: [{ requestTargets: ['Management'] }] }, edge, prefixed)).toBe(false);
  });

  test("a virtual cluster named by namespace is in the project's recorded namespace, not the prefix's", () => {
    // The project was created under the prefix team- and keeps team-web after the prefix became p-.
    const recorded = (project: string) => (project === 'web' ? 'team-web' : prefixed(project));
    const dev = { kind: 'VirtualCluster', project: 'web', virtualCluster: 'dev' } as const;
    const namedBy = (namespace: string) => ({
      rules: [
        { requestTargets: ['ProjectVirtualCluster' as const], virtualClusters: [{ name: 'dev', namespace }] },
      ],
    });
    expect(scopeAdmitsTarget(namedBy('team-web'), dev, recorded)).toBe(true);
    expect(scopeAdmitsTarget(namedBy('p-web'), dev, recorded)).toBe(false);
    expect(scopeAdmitsTarget(namedBy('p-web'), dev, prefixed)).toBe(true);
  });

  test('review bodies', () => {
    expect(
      parseTokenReview({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 't' } }),
    ).toEqual({
      apiVersion: 'authentication.k8s.io/v1',
      token: 't',
      audiences: undefined,
    });
    expect(
      parseTokenReview({ kind: 'TokenReview', apiVersion: 'x/v1', spec: { token: 't' } }),
    ).toBeInstanceOf(StatusError);
    expect(
      parseTokenReview({ kind: 'TokenReview', apiVersion: 'authentication.k8s.io/v1', spec: {} }),
    ).toBeInstanceOf(StatusError);
  });
});

describe('reviewer credentials', () => {
  const edge = { kind: 'Cluster', cluster: 'edge' } as const;
  const dev = { kind: 'VirtualCluster', project: 'web', virtualCluster: 'dev' } as const;
  test('the role agent with the cluster listed reviews for that cluster only', () => {
    expect(reviewerAllowed({ roles: [{ role: 'agent' }], clusters: [{ cluster: 'edge' }] }, edge)).toBe(true);
    expect(reviewerAllowed({ roles: [{ role: 'agent' }], clusters: [{ cluster: 'core' }] }, edge)).toBe(
      false,
    );
    expect(reviewerAllowed({ roles: [{ role: 'agent' }] }, edge)).toBe(false);
    expect(reviewerAllowed({ clusters: [{ cluster: 'edge' }] }, edge)).toBe(false);
    expect(reviewerAllowed({ roles: [{ role: 'agent' }], clusters: [{ cluster: 'edge' }] }, dev)).toBe(false);
  });

  test('the role vcluster reviews for the virtual clusters its entry covers', () => {
    const entry = (projects?: string[], virtualClusters?: string[]) => ({
      roles: [
        {
          role: 'vcluster' as const,
          ...(projects ? { projects } : {}),
          ...(virtualClusters ? { virtualClusters } : {}),
        },
      ],
    });
    expect(reviewerAllowed(entry(['web'], ['dev']), dev)).toBe(true);
    expect(reviewerAllowed(entry(['web']), dev)).toBe(true);
    expect(reviewerAllowed(entry(['db'], ['dev']), dev)).toBe(false);
    expect(reviewerAllowed(entry(['web'], ['prod']), dev)).toBe(false);
    expect(reviewerAllowed(entry(['web'], ['dev']), edge)).toBe(false);
  });

  test('no ordinary key is a reviewer: unscoped keys and other roles review nothing', () => {
    expect(reviewerAllowed(undefined, edge)).toBe(false);
    expect(reviewerAllowed(undefined, dev)).toBe(false);
    expect(
      reviewerAllowed({ roles: [{ role: 'platform-cli' }], clusters: [{ cluster: 'edge' }] }, edge),
    ).toBe(false);
  });
});

describe('direct token reviews', () => {
  const key = { metadata: { name: 'k', uid: 'uid-k' }, spec: { subject: 'ci' } } as OwnedAccessKey;
  const owners = (found: OwnedAccessKey | undefined) => ({
    key: (name: string) => (found?.metadata.name === name ? found : undefined),
    user: () => undefined,
    team: () => undefined,
  });
  const token = (
    audiences: string[],
    scope?: VerifiedDirectToken['claim']['scope'],
  ): VerifiedDirectToken => ({
    username: 'ci',
    groups: ['platform:authenticated'],
    audiences,
    claim: { uid: '', name: 'ci', kind: 'Subject', gen: 0, accessKey: { name: 'k', uid: 'uid-k' }, scope },
  });
  const edge = { kind: 'Cluster', cluster: 'edge' } as const;
  const dev = { kind: 'VirtualCluster', project: 'web', virtualCluster: 'dev' } as const;

  test('accepts a token for the target while its key is in force, with the key as the extra', () => {
    expect(
      directTokenReviewDecision(
        token(['edge'], { clusters: [{ cluster: 'edge' }] }),
        edge,
        prefixed,
        owners(key),
      ),
    ).toEqual({
      username: 'ci',
      uid: undefined,
      groups: ['platform:authenticated'],
      accessKeyName: 'k',
    });
    expect(directTokenReviewDecision(token(['web/dev']), dev, prefixed, owners(key))?.username).toBe('ci');
    expect(
      directTokenReviewDecision(token(['management.platform']), edge, prefixed, owners(key))?.username,
    ).toBe('ci');
  });

  test('refuses another audience, a scope without the target, an unverified token and a revoked one', () => {
    expect(directTokenReviewDecision(token(['east']), edge, prefixed, owners(key))).toBeUndefined();
    expect(directTokenReviewDecision(token(['web/dev']), edge, prefixed, owners(key))).toBeUndefined();
    expect(
      directTokenReviewDecision(
        token(['management.platform'], { clusters: [{ cluster: 'east' }] }),
        edge,
        prefixed,
        owners(key),
      ),
    ).toBeUndefined();
    expect(directTokenReviewDecision(undefined, edge, prefixed, owners(key))).toBeUndefined();
    expect(directTokenReviewDecision(token(['edge']), edge, prefixed, owners(undefined))).toBeUndefined();
    const disabled = { ...key, spec: { ...key.spec, disabled: true } } as OwnedAccessKey;
    expect(directTokenReviewDecision(token(['edge']), edge, prefixed, owners(disabled))).toBeUndefined();
  });
});

import { randomBytes } from 'node:crypto';
import { ApiException, type V1Secret } from '@kubernetes/client-node';
import { PROJECT_LABEL } from '../api/labels.ts';
import { API_GROUP, API_VERSION } from '../api/meta.ts';
import {
  reviewAllowed,
  SUBJECT_ACCESS_REVIEWS_PATH,
  subjectAccessReview,
} from '../authz/subject-access-review.ts';
import { PlatformConfigReader } from '../config/platform-config.ts';
import type { RandomBytes } from '../identity/keys.ts';
import type { PepperStore } from '../identity/pepper.ts';
import { type RestMapper, UnknownKind } from '../runtime/apply.ts';
import { ownValue } from '../runtime/json.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { type ClaimedKey, type ClaimOutcome, KeyIdClaims } from './key-id-claims.ts';
import type { AdmittedObject, AdmittedOwnerReference, UserInfo } from './review.ts';
import { PLATFORM_CONFIG_SECRET } from './rules/secret.ts';

/**
 * The I/O edge of admission: everything an admission policy may read from (or, for the key-id
 * claim, write to) the cluster. Policies (`policies.ts`) see only this interface, so their
 * decisions stay pure; {@link ClusterReader} is the one implementation, against the apiserver.
 * Every lookup failure throws, and the dispatcher then denies (fail closed).
 */
export interface ClusterState {
  /** A SubjectAccessReview for `user` on `resourceAttributes`. */
  mayAccess(user: UserInfo, resourceAttributes: Readonly<Record<string, string>>): Promise<boolean>;
  /** The resource an owner reference names, or why it cannot be resolved. */
  ownerResource(
    reference: AdmittedOwnerReference,
  ): Promise<OwnerResource | { readonly unresolvable: string }>;
  /** The project label of each namespace; a namespace that does not exist has none. */
  namespaceProjects(names: readonly string[]): Promise<ReadonlyMap<string, string | undefined>>;
  /** A Project's recorded `status.namespace` (undefined when none yet); undefined when the Project does not exist. */
  project(name: string): Promise<{ readonly recordedNamespace: string | undefined } | undefined>;
  /** The platform configuration in effect (`PlatformConfigReader`'s rule), read now. */
  platformConfig(): Promise<ReturnType<PlatformConfigReader['of']>>;
  /** Whether a cluster-scoped identity of ours exists. */
  identityExists(plural: 'users' | 'teams', name: string): Promise<boolean>;
  /** Whether a VirtualClusterTemplate (cluster-scoped) of this name exists. */
  templateExists(name: string): Promise<boolean>;
  /** The pepper hashing access keys, with warnings for a dry-run before it exists. */
  pepper(dryRun: boolean): Promise<{ readonly pepper: Uint8Array; readonly warnings: readonly string[] }>;
  /** Claims a new key's id (key-id-claims.ts); the one write admission makes besides the pepper. */
  claimKeyId(key: ClaimedKey): Promise<ClaimOutcome>;
}

export interface OwnerResource {
  readonly plural: string;
  readonly namespaced: boolean;
  readonly group: string;
  readonly version: string;
}

export interface ClusterReaderDependencies {
  readonly api: KubeApi;
  readonly restMapper: RestMapper;
  readonly pepper: PepperStore;
  /** Namespace of the platform-config Secret and the pepper Secret. */
  readonly platformNamespace: string;
  /** For the throwaway pepper of a dry-run before the pepper Secret exists. */
  readonly random?: RandomBytes;
}

export class ClusterReader implements ClusterState {
  /** Used only for dry-runs before the pepper exists: the hash shown is then not the one that would be stored. */
  private dryRunPepper: Uint8Array | undefined;
  /** The configuration in effect, with the one rule for an invalid one. */
  private readonly platformConfigReader = new PlatformConfigReader();
  private readonly claims: KeyIdClaims;

  constructor(private readonly deps: ClusterReaderDependencies) {
    this.claims = new KeyIdClaims(deps.api, deps.platformNamespace);
  }

  async mayAccess(user: UserInfo, resourceAttributes: Readonly<Record<string, string>>): Promise<boolean> {
    const review = await this.deps.api.request<{ status?: { allowed?: boolean } }>({
      method: 'POST',
      path: SUBJECT_ACCESS_REVIEWS_PATH,
      body: subjectAccessReview(user, resourceAttributes),
    });
    return reviewAllowed(review);
  }

  async ownerResource(reference: AdmittedOwnerReference) {
    try {
      return await this.deps.restMapper.resourceFor(reference.apiVersion, reference.kind);
    } catch (err) {
      if (!isUnknownKind(err)) throw err;
      return { unresolvable: `no resource for kind ${reference.kind} in ${reference.apiVersion}` };
    }
  }

  async namespaceProjects(names: readonly string[]): Promise<Map<string, string | undefined>> {
    const entries = await Promise.all(
      names.map(async (name): Promise<[string, string | undefined]> => {
        const namespace = await this.getOrUndefined<AdmittedObject>(
          `/api/v1/namespaces/${encodeURIComponent(name)}`,
        );
        return [name, ownValue(namespace?.metadata?.labels ?? {}, PROJECT_LABEL) || undefined];
      }),
    );
    return new Map(entries);
  }

  async project(name: string) {
    const project = await this.getOrUndefined<{ status?: { namespace?: string } }>(
      `/apis/${API_GROUP}/${API_VERSION}/projects/${encodeURIComponent(name)}`,
    );
    return project ? { recordedNamespace: project.status?.namespace } : undefined;
  }

  async platformConfig() {
    const secret = await this.getOrUndefined<V1Secret>(
      `/api/v1/namespaces/${encodeURIComponent(this.deps.platformNamespace)}/secrets/${PLATFORM_CONFIG_SECRET}`,
    );
    return this.platformConfigReader.of(secret);
  }

  async identityExists(plural: 'users' | 'teams', name: string): Promise<boolean> {
    const identity = await this.getOrUndefined(
      `/apis/${API_GROUP}/${API_VERSION}/${plural}/${encodeURIComponent(name)}`,
    );
    return identity !== undefined;
  }

  async templateExists(name: string): Promise<boolean> {
    const template = await this.getOrUndefined(
      `/apis/${API_GROUP}/${API_VERSION}/virtualclustertemplates/${encodeURIComponent(name)}`,
    );
    return template !== undefined;
  }

  async pepper(dryRun: boolean) {
    if (!dryRun) return { pepper: await this.deps.pepper.ensure(), warnings: [] };
    const existing = await this.deps.pepper.load();
    if (existing) return { pepper: existing, warnings: [] };
    this.dryRunPepper ??= new Uint8Array((this.deps.random ?? randomBytes)(32));
    return {
      pepper: this.dryRunPepper,
      warnings: [
        'dry run: spec.keyHash shown is illustrative; the hashing secret is created on the first real create',
      ],
    };
  }

  claimKeyId(key: ClaimedKey): Promise<ClaimOutcome> {
    return this.claims.claim(key);
  }

  /** GET `path`; undefined when the apiserver answers 404. */
  private async getOrUndefined<T>(path: string): Promise<T | undefined> {
    try {
      return await this.deps.api.request<T>({ method: 'GET', path });
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  }
}

/** Discovery does not know the owner's group version (404) or kind (RestMapper's miss). */
function isUnknownKind(err: unknown): boolean {
  if (err instanceof ApiException) return err.code === 404;
  return err instanceof UnknownKind;
}

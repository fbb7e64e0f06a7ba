import { randomBytes } from 'node:crypto';
import { ApiException, type V1Secret } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION } from '../api/meta.ts';
import { PlatformConfigReader } from '../config/platform-config.ts';
import { PROJECT_LABEL } from '../controllers/project/desired.ts';
import type { RandomBytes } from '../identity/keys.ts';
import type { PepperStore } from '../identity/pepper.ts';
import { type RestMapper, UnknownKind } from '../runtime/apply.ts';
import { ownValue } from '../runtime/json.ts';
import type { KubeApi } from '../runtime/kube-client.ts';
import { type AdmissionDecision, allow, combine, internalError, invalid } from './decision.ts';
import { KeyIdClaims } from './key-id-claims.ts';
import type { AdmissionRequest, AdmittedObject, UserInfo } from './review.ts';
import {
  blockOwnerDeletionCauses,
  controllerReferenceCauses,
  metadataUpdateCauses,
  type OwnerDeleteCheck,
  ownerReferencesNeedingDeletePermission,
} from './rules/metadata.ts';
import {
  mutateOwnedAccessKey,
  needsMaxTtl,
  subjectOf,
  validateOwnedAccessKey,
} from './rules/ownedaccesskey.ts';
import {
  decideSecretSync,
  isPlatformComponent,
  PLATFORM_CONFIG_SECRET,
  refuseComponentSecretSync,
  syncSourceToAuthorize,
  validatePlatformConfigSecret,
} from './rules/secret.ts';
import { namedIdentities, validateSharedSecret } from './rules/sharedsecret.ts';
import { placementLookups, validateVirtualClusterInstance } from './rules/virtualclusterinstance.ts';

/**
 * The I/O edge of admission: gathers what the pure rules need (SubjectAccessReviews, discovery,
 * the pepper, the platform configuration, whether users and teams exist), then lets the rules
 * decide. Every lookup failure denies (fail closed) with a message that names no secret.
 */

/** URL paths the server answers; the webhook configurations point at them. */
export const MUTATE_PATH = '/mutate';
export const VALIDATE_PATH = '/validate';
export const VALIDATE_SECRETS_PATH = '/validate-secrets';

export interface AdmissionDependencies {
  readonly api: KubeApi;
  readonly restMapper: RestMapper;
  readonly pepper: PepperStore;
  /** Namespace of the platform-config Secret and the pepper Secret. */
  readonly platformNamespace: string;
  /** For the throwaway pepper of a dry-run before the pepper Secret exists. */
  readonly random?: RandomBytes;
}

/** A request was not for a path, resource or operation this webhook serves. */
export class UnexpectedAdmissionRequest extends Error {
  override readonly name = 'UnexpectedAdmissionRequest';
}

const isOurs = (request: AdmissionRequest) => request.resource.group === API_GROUP;

export class Admission {
  /** Used only for dry-runs before the pepper exists: the hash shown is then not the one that would be stored. */
  private dryRunPepper: Uint8Array | undefined;
  /** The configuration in effect, with the one rule for an invalid one. */
  private readonly platformConfig = new PlatformConfigReader();
  private readonly claims: KeyIdClaims;

  constructor(private readonly deps: AdmissionDependencies) {
    this.claims = new KeyIdClaims(deps.api, deps.platformNamespace);
  }

  /** Dispatches by path; unknown paths throw {@link UnexpectedAdmissionRequest}. */
  async review(path: string, request: AdmissionRequest): Promise<AdmissionDecision> {
    try {
      if (path === MUTATE_PATH) return await this.mutate(request);
      if (path === VALIDATE_PATH) return await this.validate(request);
      if (path === VALIDATE_SECRETS_PATH) return await this.validateSecret(request);
    } catch (err) {
      if (err instanceof UnexpectedAdmissionRequest) throw err;
      return internalError(`the admission webhook could not decide: ${describeFailure(err)}`);
    }
    throw new UnexpectedAdmissionRequest(`no webhook at ${path}`);
  }

  private async mutate(request: AdmissionRequest): Promise<AdmissionDecision> {
    if (
      request.resource.resource !== 'ownedaccesskeys' ||
      request.operation !== 'CREATE' ||
      !request.object
    ) {
      return allow();
    }
    const spec = request.object.spec as { key?: unknown } | undefined;
    if (spec?.key === undefined) return mutateOwnedAccessKey(request.object, EMPTY_PEPPER_UNUSED);
    const { pepper, warnings } = await this.pepperFor(request);
    const decision = mutateOwnedAccessKey(request.object, pepper);
    return { ...decision, warnings: [...decision.warnings, ...warnings] };
  }

  private async pepperFor(request: AdmissionRequest): Promise<{ pepper: Uint8Array; warnings: string[] }> {
    if (!request.dryRun) return { pepper: await this.deps.pepper.ensure(), warnings: [] };
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

  private async validate(request: AdmissionRequest): Promise<AdmissionDecision> {
    if (!isOurs(request))
      throw new UnexpectedAdmissionRequest(`${request.resource.group} is not our API group`);
    const object = request.object;
    if ((request.operation !== 'CREATE' && request.operation !== 'UPDATE') || !object) return allow();
    const oldObject = request.operation === 'UPDATE' ? request.oldObject : undefined;
    const subject = subjectOf(object, request.kind.kind);
    const metadataCauses = [
      ...controllerReferenceCauses(object),
      ...(oldObject ? metadataUpdateCauses(oldObject.metadata ?? {}, object.metadata ?? {}) : []),
      ...(await this.ownerDeletionCauses(request, oldObject, object)),
    ];
    const decisions: AdmissionDecision[] = [
      metadataCauses.length > 0 ? invalid(subject, metadataCauses) : allow(),
    ];
    switch (request.resource.resource) {
      case 'ownedaccesskeys': {
        const max = needsMaxTtl(oldObject, object) ? await this.maxAccessKeyTtl() : undefined;
        decisions.push(validateOwnedAccessKey(oldObject, object, max));
        decisions.push(allow({ warnings: await this.spaceWarnings(object) }));
        // The id is claimed last, once everything else admitted the key (a refused key claims nothing).
        const decided = combine(subject, decisions);
        if (!decided.allowed || request.operation !== 'CREATE' || request.dryRun) return decided;
        return combine(subject, [decided, await this.claimKeyId(object)]);
      }
      case 'sharedsecrets':
        decisions.push(validateSharedSecret(object, await this.missingIdentities(object)));
        break;
      case 'virtualclusterinstances': {
        const projects = await this.namespaceProjects(placementLookups(oldObject, object));
        decisions.push(validateVirtualClusterInstance(oldObject, object, (ns) => projects.get(ns)));
        break;
      }
    }
    return combine(subject, decisions);
  }

  private async validateSecret(request: AdmissionRequest): Promise<AdmissionDecision> {
    if (request.resource.group !== '' || request.resource.resource !== 'secrets') {
      throw new UnexpectedAdmissionRequest('the secrets webhook only reviews core Secrets');
    }
    const object = request.object;
    if ((request.operation !== 'CREATE' && request.operation !== 'UPDATE') || !object) return allow();
    const oldObject = request.operation === 'UPDATE' ? request.oldObject : undefined;
    const decisions: AdmissionDecision[] = [];
    if (
      request.namespace === this.deps.platformNamespace &&
      object.metadata?.name === PLATFORM_CONFIG_SECRET
    ) {
      decisions.push(validatePlatformConfigSecret(object));
    }
    const source = syncSourceToAuthorize(oldObject, object);
    if (source && isPlatformComponent(request.userInfo, this.deps.platformNamespace)) {
      decisions.push(refuseComponentSecretSync(source, request.userInfo));
    } else if (source) {
      const mayGet = await this.subjectAccessReview(request.userInfo, {
        verb: 'get',
        group: API_GROUP,
        version: API_VERSION,
        resource: 'sharedsecrets',
        namespace: source.namespace,
        name: source.name,
      });
      decisions.push(decideSecretSync(source, mayGet));
    }
    return combine(subjectOf(object, 'Secret'), decisions);
  }

  private async ownerDeletionCauses(
    request: AdmissionRequest,
    oldObject: AdmittedObject | null | undefined,
    object: AdmittedObject,
  ) {
    const needed = ownerReferencesNeedingDeletePermission(oldObject, object);
    if (needed.length === 0) return [];
    const checks = await Promise.all(
      needed.map(async ({ reference }): Promise<OwnerDeleteCheck> => {
        let owner: { plural: string; namespaced: boolean; group: string; version: string };
        try {
          owner = await this.deps.restMapper.resourceFor(reference.apiVersion, reference.kind);
        } catch (err) {
          if (!isUnknownKind(err)) throw err;
          return {
            outcome: 'unresolvable',
            why: `no resource for kind ${reference.kind} in ${reference.apiVersion}`,
          };
        }
        const allowed = await this.subjectAccessReview(request.userInfo, {
          verb: 'delete',
          group: owner.group,
          version: owner.version,
          resource: owner.plural,
          ...(owner.namespaced && request.namespace ? { namespace: request.namespace } : {}),
          name: reference.name,
        });
        return { outcome: allowed ? 'allowed' : 'denied' };
      }),
    );
    return blockOwnerDeletionCauses(needed, checks);
  }

  private async subjectAccessReview(
    user: UserInfo,
    resourceAttributes: Record<string, string>,
  ): Promise<boolean> {
    const review = await this.deps.api.request<{ status?: { allowed?: boolean } }>({
      method: 'POST',
      path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          ...(user.username !== undefined ? { user: user.username } : {}),
          ...(user.uid !== undefined ? { uid: user.uid } : {}),
          groups: user.groups ?? [],
          ...(user.extra ? { extra: user.extra } : {}),
          resourceAttributes,
        },
      },
    });
    return review.status?.allowed === true;
  }

  /** The project label of each namespace; a namespace that does not exist has none. */
  private async namespaceProjects(names: readonly string[]): Promise<Map<string, string | undefined>> {
    const entries = await Promise.all(
      names.map(async (name): Promise<[string, string | undefined]> => {
        try {
          const namespace = await this.deps.api.request<AdmittedObject>({
            method: 'GET',
            path: `/api/v1/namespaces/${encodeURIComponent(name)}`,
          });
          return [name, ownValue(namespace.metadata?.labels ?? {}, PROJECT_LABEL) || undefined];
        } catch (err) {
          if (err instanceof ApiException && err.code === 404) return [name, undefined];
          throw err;
        }
      }),
    );
    return new Map(entries);
  }

  /**
   * A space is a namespace of its project (the project's own: its recorded `status.namespace`, or
   * `<projectNamespacePrefix><project>`); a `scope.spaces` entry naming another matches nothing,
   * which admission says.
   */
  private async spaceWarnings(object: AdmittedObject): Promise<string[]> {
    const spaces = (
      object.spec as { scope?: { spaces?: { project?: unknown; space?: unknown }[] } } | undefined
    )?.scope?.spaces;
    if (!Array.isArray(spaces) || spaces.length === 0) return [];
    const prefix = (await this.platformConfigInEffect()).projectNamespacePrefix;
    const warnings: string[] = [];
    for (const [i, entry] of spaces.entries()) {
      if (typeof entry?.project !== 'string' || typeof entry.space !== 'string' || entry.space === '*')
        continue;
      const project = await this.deps.api
        .request<{ status?: { namespace?: string } }>({
          method: 'GET',
          path: `/apis/${API_GROUP}/${API_VERSION}/projects/${encodeURIComponent(entry.project)}`,
        })
        .catch((err: unknown) => {
          if (err instanceof ApiException && err.code === 404) return undefined;
          throw err;
        });
      const namespace = project ? (project.status?.namespace ?? `${prefix}${entry.project}`) : undefined;
      if (namespace !== entry.space) {
        warnings.push(
          `scope.spaces[${i}]: ${entry.space} is not a namespace of project ${entry.project}${project ? ` (its namespace is ${namespace})` : ' (no such project)'}: this entry matches nothing`,
        );
      }
    }
    return warnings;
  }

  /** A new key's id, unique (key-id-claims.ts): refused when another key has it. */
  private async claimKeyId(object: AdmittedObject): Promise<AdmissionDecision> {
    const keyId = (object.spec as { keyId?: unknown } | undefined)?.keyId;
    const uid = object.metadata?.uid;
    if (typeof keyId !== 'string' || !uid) return allow();
    const outcome = await this.claims.claim({ name: object.metadata?.name ?? '', uid, keyId });
    if (outcome === 'claimed') return allow();
    return invalid(subjectOf(object, 'OwnedAccessKey'), [
      {
        field: 'spec.key',
        reason: 'FieldValueDuplicate',
        message: 'another access key has this id; leave spec.key empty to have a new key generated',
      },
    ]);
  }

  /** The platform maximum key ttl, from the configuration in effect. */
  private async maxAccessKeyTtl(): Promise<number | undefined> {
    const max = (await this.platformConfigInEffect()).auth.accessKeyMaxTTLSeconds;
    return max ? max : undefined;
  }

  /** The platform configuration in effect (`PlatformConfigReader`'s rule), read now. */
  private async platformConfigInEffect() {
    let secret: V1Secret | undefined;
    try {
      secret = await this.deps.api.request<V1Secret>({
        method: 'GET',
        path: `/api/v1/namespaces/${encodeURIComponent(this.deps.platformNamespace)}/secrets/${PLATFORM_CONFIG_SECRET}`,
      });
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 404)) throw err;
    }
    return this.platformConfig.of(secret);
  }

  private async missingIdentities(object: AdmittedObject) {
    const { users, teams } = namedIdentities(object);
    const exists = async (plural: string, name: string) => {
      try {
        await this.deps.api.request({
          method: 'GET',
          path: `/apis/${API_GROUP}/${API_VERSION}/${plural}/${encodeURIComponent(name)}`,
        });
        return true;
      } catch (err) {
        if (err instanceof ApiException && err.code === 404) return false;
        throw err;
      }
    };
    const [userExists, teamExists] = await Promise.all([
      Promise.all(users.map((u) => exists('users', u))),
      Promise.all(teams.map((t) => exists('teams', t))),
    ]);
    return {
      users: users.filter((_, i) => !userExists[i]),
      teams: teams.filter((_, i) => !teamExists[i]),
    };
  }
}

/** Discovery does not know the owner's group version (404) or kind (RestMapper's miss). */
function isUnknownKind(err: unknown): boolean {
  if (err instanceof ApiException) return err.code === 404;
  return err instanceof UnknownKind;
}

/** Never used to hash: `mutateOwnedAccessKey` only hashes when `spec.key` is present. */
const EMPTY_PEPPER_UNUSED = new Uint8Array(0);

/** A failure's class and HTTP code, never its body (which could echo request content). */
function describeFailure(err: unknown): string {
  if (err instanceof ApiException) return `the apiserver answered ${err.code}`;
  if (err instanceof Error) return err.name;
  return 'unknown error';
}

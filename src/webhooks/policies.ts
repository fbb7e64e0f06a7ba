import { API_GROUP, API_VERSION } from '../api/meta.ts';
import { STORED_KINDS } from '../api/registry.ts';
import type { ClusterState } from './cluster-state.ts';
import { type AdmissionDecision, allow, invalid } from './decision.ts';
import type { AdmissionRequest, AdmittedObject } from './review.ts';
import {
  blockOwnerDeletionCauses,
  controllerReferenceCauses,
  metadataUpdateCauses,
  type OwnerDeleteCheck,
  ownerReferencesNeedingDeletePermission,
} from './rules/metadata.ts';
import {
  mutateOwnedAccessKey,
  namedSpaces,
  needsMaxTtl,
  spaceWarnings,
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
import {
  placementLookups,
  templateToCheck,
  validateTemplateRef,
  validateVirtualClusterInstance,
} from './rules/virtualclusterinstance.ts';
import { validateVirtualClusterTemplate } from './rules/virtualclustertemplate.ts';

/**
 * Admission as a table: for each resource, the chain of policies each operation runs, mutating
 * and validating apart (as the webhook configurations register them). An admission rule goes
 * here: write its decision as a pure function in `rules/`, wrap it in a {@link Policy} (what it
 * reads from the cluster, then the decision), and add it to the chain of its resource and
 * operations. The dispatcher (`admission.ts`) runs a chain; `cluster-state.ts` does the reading.
 */

/** What a policy decides on. */
export interface PolicyInput {
  readonly request: AdmissionRequest;
  /** The object as it would be stored (for DELETE: the object being deleted). */
  readonly object: AdmittedObject;
  /** The stored object an UPDATE replaces; undefined on CREATE. */
  readonly oldObject: AdmittedObject | undefined;
  /** Namespace of the platform-config Secret and the pepper Secret. */
  readonly platformNamespace: string;
}

/**
 * One admission rule: `gather` reads what the rule needs through {@link ClusterState} (the only I/O
 * a rule does), `decide` is pure. Method syntax on purpose: a chain holds policies of different
 * `Facts`, each handed only the facts its own `gather` returned.
 */
export interface Policy<Facts = unknown> {
  gather(input: PolicyInput, cluster: ClusterState): Promise<Facts>;
  decide(input: PolicyInput, facts: Facts): AdmissionDecision;
}

/** The policies an operation runs: all of `checks` (their decisions combined), then `onAdmitted`. */
export interface PolicyChain {
  readonly checks: readonly Policy[];
  /** Run only once every check admitted the object, in order; for claims a refused object must not make. */
  readonly onAdmitted?: readonly Policy[];
}

export type AdmittedOperation = 'CREATE' | 'UPDATE' | 'DELETE';

/** Per operation; an operation without a chain is admitted unchanged. */
export type OperationChains = Readonly<Partial<Record<AdmittedOperation, PolicyChain>>>;

/** Keyed by {@link resourceKey}. */
export type PolicyTable = Readonly<Record<string, OperationChains>>;

/** `ownedaccesskeys.management.platform`, or `secrets` for the core group (kubectl's spelling). */
export function resourceKey(resource: { readonly group: string; readonly resource: string }): string {
  return resource.group === '' ? resource.resource : `${resource.resource}.${resource.group}`;
}

/** A rule needing nothing from the cluster. */
function pureRule(decide: (input: PolicyInput) => AdmissionDecision): Policy<undefined> {
  return { gather: async () => undefined, decide: (input) => decide(input) };
}

// --- policies ---------------------------------------------------------------------------------

/** Every kind of ours: controller references, metadata invariants on update, blockOwnerDeletion. */
const ownerMetadata: Policy<readonly OwnerDeleteCheck[]> = {
  gather: ({ request, object, oldObject }, cluster) =>
    Promise.all(
      ownerReferencesNeedingDeletePermission(oldObject, object).map(
        async ({ reference }): Promise<OwnerDeleteCheck> => {
          const owner = await cluster.ownerResource(reference);
          if ('unresolvable' in owner) return { outcome: 'unresolvable', why: owner.unresolvable };
          const allowed = await cluster.mayAccess(request.userInfo, {
            verb: 'delete',
            group: owner.group,
            version: owner.version,
            resource: owner.plural,
            ...(owner.namespaced && request.namespace ? { namespace: request.namespace } : {}),
            name: reference.name,
          });
          return { outcome: allowed ? 'allowed' : 'denied' };
        },
      ),
    ),
  decide: ({ request, object, oldObject }, checks) => {
    const causes = [
      ...controllerReferenceCauses(object),
      ...(oldObject ? metadataUpdateCauses(oldObject.metadata ?? {}, object.metadata ?? {}) : []),
      ...blockOwnerDeletionCauses(ownerReferencesNeedingDeletePermission(oldObject, object), checks),
    ];
    return causes.length > 0 ? invalid(subjectOf(object, request.kind.kind), causes) : allow();
  },
};

/** Replaces a plaintext `spec.key` by its keyed hash and id. */
const hashAccessKey: Policy<{ pepper: Uint8Array; warnings: readonly string[] } | undefined> = {
  // Without spec.key there is nothing to hash, so the pepper is not even read.
  gather: async ({ request, object }, cluster) =>
    (object.spec as { key?: unknown } | undefined)?.key === undefined
      ? undefined
      : cluster.pepper(request.dryRun === true),
  decide: ({ object }, hashing) => {
    const decision = mutateOwnedAccessKey(object, hashing?.pepper ?? NO_PEPPER_NEEDED);
    return { ...decision, warnings: [...decision.warnings, ...(hashing?.warnings ?? [])] };
  },
};

/** Never used to hash: `mutateOwnedAccessKey` only hashes when `spec.key` is present. */
const NO_PEPPER_NEEDED = new Uint8Array(0);

const accessKeySpec: Policy<number | undefined> = {
  gather: async ({ object, oldObject }, cluster) => {
    if (!needsMaxTtl(oldObject, object)) return undefined;
    return (await cluster.platformConfig()).auth.accessKeyMaxTTLSeconds || undefined;
  },
  decide: ({ object, oldObject }, maxTtlSeconds) => validateOwnedAccessKey(oldObject, object, maxTtlSeconds),
};

interface SpaceFacts {
  readonly projectNamespacePrefix: string;
  readonly projects: ReadonlyMap<string, { readonly recordedNamespace: string | undefined } | undefined>;
}

/** `scope.spaces` entries naming a namespace that is not their project's (a warning: they match nothing). */
const accessKeySpaces: Policy<SpaceFacts | undefined> = {
  gather: async ({ object }, cluster) => {
    const names = [...new Set(namedSpaces(object).map((entry) => entry.project))];
    if (names.length === 0) return undefined;
    const { projectNamespacePrefix } = await cluster.platformConfig();
    const found = await Promise.all(names.map((name) => cluster.project(name)));
    return { projectNamespacePrefix, projects: new Map(names.map((name, i) => [name, found[i]])) };
  },
  decide: ({ object }, facts) =>
    allow({
      warnings: facts ? spaceWarnings(object, facts.projectNamespacePrefix, facts.projects) : [],
    }),
};

/** A new key's id is unique (key-id-claims.ts): refused when another key has it. A dry run claims nothing. */
const claimAccessKeyId: Policy<'claimed' | 'taken' | undefined> = {
  gather: async ({ request, object }, cluster) => {
    const keyId = (object.spec as { keyId?: unknown } | undefined)?.keyId;
    const uid = object.metadata?.uid;
    if (request.dryRun || typeof keyId !== 'string' || !uid) return undefined;
    return cluster.claimKeyId({ name: object.metadata?.name ?? '', uid, keyId });
  },
  decide: ({ object }, outcome) =>
    outcome === 'taken'
      ? invalid(subjectOf(object, 'OwnedAccessKey'), [
          {
            field: 'spec.key',
            reason: 'FieldValueDuplicate',
            message: 'another access key has this id; leave spec.key empty to have a new key generated',
          },
        ])
      : allow(),
};

/** Users and teams named that do not exist (a warning, not a denial). */
const sharedSecretAccess: Policy<{ users: string[]; teams: string[] }> = {
  gather: async ({ object }, cluster) => {
    const { users, teams } = namedIdentities(object);
    const [userExists, teamExists] = await Promise.all([
      Promise.all(users.map((name) => cluster.identityExists('users', name))),
      Promise.all(teams.map((name) => cluster.identityExists('teams', name))),
    ]);
    return {
      users: users.filter((_, i) => !userExists[i]),
      teams: teams.filter((_, i) => !teamExists[i]),
    };
  },
  decide: ({ object }, missing) => validateSharedSecret(object, missing),
};

const virtualClusterPlacement: Policy<ReadonlyMap<string, string | undefined>> = {
  gather: ({ object, oldObject }, cluster) => cluster.namespaceProjects(placementLookups(oldObject, object)),
  decide: ({ object, oldObject }, projects) =>
    validateVirtualClusterInstance(oldObject, object, (namespace) => projects.get(namespace)),
};

/** A new provisioned instance's template exists (rules/virtualclusterinstance.ts). */
const virtualClusterTemplate: Policy<boolean | undefined> = {
  gather: async ({ object, oldObject }, cluster) => {
    const name = templateToCheck(oldObject, object);
    return name === undefined ? undefined : cluster.templateExists(name);
  },
  decide: ({ object, oldObject }, exists) => validateTemplateRef(oldObject, object, exists),
};

const templateConfig = pureRule(({ object, oldObject }) => validateVirtualClusterTemplate(oldObject, object));

const platformConfigSecret = pureRule(({ request, object, platformNamespace }) =>
  request.namespace === platformNamespace && object.metadata?.name === PLATFORM_CONFIG_SECRET
    ? validatePlatformConfigSecret(object)
    : allow(),
);

/**
 * A Secret labelled to receive a SharedSecret's data: the requester must be allowed to read that
 * SharedSecret; platform components never label Secrets so (they would lend their rights).
 */
const secretSyncSource: Policy<boolean> = {
  gather: async ({ request, object, oldObject, platformNamespace }, cluster) => {
    const source = syncSourceToAuthorize(oldObject, object);
    if (!source || isPlatformComponent(request.userInfo, platformNamespace)) return false;
    return cluster.mayAccess(request.userInfo, {
      verb: 'get',
      group: API_GROUP,
      version: API_VERSION,
      resource: 'sharedsecrets',
      namespace: source.namespace,
      name: source.name,
    });
  },
  decide: ({ request, object, oldObject, platformNamespace }, mayGet) => {
    const source = syncSourceToAuthorize(oldObject, object);
    if (!source) return allow();
    if (isPlatformComponent(request.userInfo, platformNamespace))
      return refuseComponentSecretSync(source, request.userInfo);
    return decideSecretSync(source, mayGet);
  },
};

// --- the tables -------------------------------------------------------------------------------

const writes = (chain: PolicyChain): OperationChains => ({ CREATE: chain, UPDATE: chain });

/** The mutating webhook (`/mutate`). */
export const MUTATING_POLICIES: PolicyTable = {
  [`ownedaccesskeys.${API_GROUP}`]: { CREATE: { checks: [hashAccessKey] } },
};

/** The validating webhook of our kinds (`/validate`): every stored kind has the metadata rules. */
export const VALIDATING_POLICIES: PolicyTable = {
  ...Object.fromEntries(
    STORED_KINDS.map((kind) => [`${kind.plural}.${API_GROUP}`, writes({ checks: [ownerMetadata] })]),
  ),
  [`ownedaccesskeys.${API_GROUP}`]: {
    // The id is claimed last, once everything else admitted the key (a refused key claims nothing).
    CREATE: {
      checks: [ownerMetadata, accessKeySpec, accessKeySpaces],
      onAdmitted: [claimAccessKeyId],
    },
    UPDATE: { checks: [ownerMetadata, accessKeySpec, accessKeySpaces] },
  },
  [`sharedsecrets.${API_GROUP}`]: writes({ checks: [ownerMetadata, sharedSecretAccess] }),
  [`virtualclusterinstances.${API_GROUP}`]: writes({
    checks: [ownerMetadata, virtualClusterPlacement, virtualClusterTemplate],
  }),
  [`virtualclustertemplates.${API_GROUP}`]: writes({ checks: [ownerMetadata, templateConfig] }),
};

/** The validating webhook of core Secrets (`/validate-secrets`): sync labels and the platform configuration. */
export const SECRET_POLICIES: PolicyTable = {
  secrets: writes({ checks: [platformConfigSecret, secretSyncSource] }),
};

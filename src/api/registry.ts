import type { z } from 'zod';
import { ClusterSchema } from './cluster.ts';
import { ConfigSchema } from './config.ts';
import { DirectClusterEndpointTokenSchema } from './directclusterendpointtoken.ts';
import { TeamSchema, UserSchema } from './identity.ts';
import { API_GROUP, API_VERSION, GROUP_VERSION, KUBERNETES_VERBS } from './meta.ts';
import { OwnedAccessKeySchema } from './ownedaccesskey.ts';
import { ProjectMembersSchema, ProjectSchema } from './project.ts';
import { SharedSecretSchema } from './sharedsecret.ts';
import {
  VirtualClusterInstanceKubeConfigSchema,
  VirtualClusterInstanceSchema,
} from './virtualclusterinstance.ts';
import { VirtualClusterTemplateSchema } from './virtualclustertemplate.ts';

type ResourceScope = 'Namespaced' | 'Cluster';
export type Verb = (typeof KUBERNETES_VERBS)[number];

/** A column of `kubectl get` (a CRD `additionalPrinterColumns` entry). */
interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  /** 0 shows in the default view; 1 only with `-o wide`. */
  priority?: number;
  format?: string;
}

interface KindBase {
  kind: string;
  /** The zod schema of a whole object of this kind. */
  schema: z.ZodType;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  scope: ResourceScope;
  verbs: readonly Verb[];
}

/** A kind stored in the host apiserver as a CRD. */
export interface StoredKind extends KindBase {
  stored: true;
  /** Subresources of the CRD; the gateway serves `virtualSubresources` on top. */
  subresources: readonly 'status'[];
  printerColumns: readonly PrinterColumn[];
  /** Fields usable in field selectors (`selectableFields`), such as `.spec.user`. */
  selectableFields: readonly string[];
  /**
   * Fields accepted through the management API but refused by the stored object (the gateway
   * consumes them first), as dotted paths such as `spec.key`.
   */
  inputOnlyFields: readonly string[];
}

/** A kind the gateway serves without storing it. */
interface VirtualKind extends KindBase {
  stored: false;
  /** Set when the kind is served as a subresource of a stored kind (for example `projects/members`). */
  subresourceOf?: { plural: string; subresource: string };
}

export type KindInfo = StoredKind | VirtualKind;

const STANDARD_VERBS: readonly Verb[] = KUBERNETES_VERBS;

const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
const displayName: PrinterColumn = { name: 'Display Name', type: 'string', jsonPath: '.spec.displayName' };
/** On every kind whose controller writes `Ready` (`kubectl wait --for=condition=Ready` reads the same). */
const ready: PrinterColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};

const stored = (
  info: Omit<StoredKind, 'stored' | 'verbs' | 'subresources' | 'inputOnlyFields' | 'selectableFields'> &
    Partial<Pick<StoredKind, 'inputOnlyFields' | 'selectableFields'>>,
): StoredKind => ({
  stored: true,
  verbs: STANDARD_VERBS,
  subresources: ['status'],
  inputOnlyFields: [],
  selectableFields: [],
  ...info,
});

/** A kind the gateway serves without storing it; none has short names. */
const served = (info: Omit<VirtualKind, 'stored' | 'shortNames'>): VirtualKind => ({
  stored: false,
  shortNames: [],
  ...info,
});

export const SHARED_SECRET = stored({
  kind: 'SharedSecret',
  schema: SharedSecretSchema,
  plural: 'sharedsecrets',
  singular: 'sharedsecret',
  shortNames: ['ssec'],
  scope: 'Namespaced',
  printerColumns: [
    displayName,
    { name: 'Keys', type: 'string', jsonPath: '.status.dataKeys', description: 'Names of the data keys.' },
    ready,
    age,
  ],
});

export const OWNED_ACCESS_KEY = stored({
  kind: 'OwnedAccessKey',
  schema: OwnedAccessKeySchema,
  plural: 'ownedaccesskeys',
  singular: 'ownedaccesskey',
  shortNames: ['oak'],
  scope: 'Cluster',
  printerColumns: [
    { name: 'User', type: 'string', jsonPath: '.spec.user' },
    { name: 'Team', type: 'string', jsonPath: '.spec.team' },
    { name: 'Type', type: 'string', jsonPath: '.spec.type' },
    { name: 'Disabled', type: 'boolean', jsonPath: '.spec.disabled' },
    { name: 'Expires', type: 'date', jsonPath: '.status.expirationTimestamp' },
    { name: 'Last Activity', type: 'date', jsonPath: '.status.lastActivity' },
    ready,
    { ...displayName, priority: 1 },
    age,
  ],
  selectableFields: ['.spec.user', '.spec.team', '.spec.subject', '.spec.type', '.spec.keyId'],
  inputOnlyFields: ['spec.key'],
});

export const USER = stored({
  kind: 'User',
  schema: UserSchema,
  plural: 'users',
  singular: 'user',
  shortNames: ['puser'],
  scope: 'Cluster',
  printerColumns: [
    displayName,
    { name: 'Username', type: 'string', jsonPath: '.spec.username' },
    { name: 'Email', type: 'string', jsonPath: '.spec.email' },
    { name: 'Disabled', type: 'boolean', jsonPath: '.spec.disabled' },
    { name: 'Teams', type: 'string', jsonPath: '.status.teams', priority: 1 },
    ready,
    age,
  ],
  selectableFields: ['.spec.username', '.spec.subject', '.spec.email'],
});

export const TEAM = stored({
  kind: 'Team',
  schema: TeamSchema,
  plural: 'teams',
  singular: 'team',
  shortNames: ['pteam'],
  scope: 'Cluster',
  printerColumns: [
    displayName,
    { name: 'Username', type: 'string', jsonPath: '.spec.username' },
    { name: 'Users', type: 'string', jsonPath: '.spec.users', priority: 1 },
    ready,
    age,
  ],
  selectableFields: ['.spec.username'],
});

export const PROJECT = stored({
  kind: 'Project',
  schema: ProjectSchema,
  plural: 'projects',
  singular: 'project',
  shortNames: ['proj'],
  scope: 'Cluster',
  printerColumns: [
    displayName,
    { name: 'Owner User', type: 'string', jsonPath: '.spec.owner.user' },
    { name: 'Owner Team', type: 'string', jsonPath: '.spec.owner.team' },
    { name: 'Namespace', type: 'string', jsonPath: '.status.namespace' },
    ready,
    age,
  ],
});

export const CLUSTER = stored({
  kind: 'Cluster',
  schema: ClusterSchema,
  plural: 'clusters',
  singular: 'cluster',
  shortNames: ['pcluster'],
  scope: 'Cluster',
  printerColumns: [displayName, { name: 'Endpoint', type: 'string', jsonPath: '.spec.endpoint' }, ready, age],
});

export const VIRTUAL_CLUSTER_INSTANCE = stored({
  kind: 'VirtualClusterInstance',
  schema: VirtualClusterInstanceSchema,
  plural: 'virtualclusterinstances',
  singular: 'virtualclusterinstance',
  shortNames: ['vci'],
  scope: 'Namespaced',
  printerColumns: [
    displayName,
    { name: 'Cluster', type: 'string', jsonPath: '.spec.clusterRef.cluster' },
    { name: 'Host Namespace', type: 'string', jsonPath: '.spec.clusterRef.namespace' },
    { name: 'Ingress', type: 'boolean', jsonPath: '.spec.accessPoint.ingress.enabled', priority: 1 },
    ready,
    age,
  ],
  selectableFields: ['.spec.clusterRef.cluster'],
});

export const VIRTUAL_CLUSTER_TEMPLATE = stored({
  kind: 'VirtualClusterTemplate',
  schema: VirtualClusterTemplateSchema,
  plural: 'virtualclustertemplates',
  singular: 'virtualclustertemplate',
  shortNames: ['vct'],
  scope: 'Cluster',
  printerColumns: [
    displayName,
    { name: 'Version', type: 'string', jsonPath: '.spec.kubernetesVersion' },
    { name: 'Storage', type: 'string', jsonPath: '.spec.storage.size' },
    { name: 'Storage Class', type: 'string', jsonPath: '.spec.storage.storageClassName', priority: 1 },
    age,
  ],
});

const DIRECT_CLUSTER_ENDPOINT_TOKEN = served({
  kind: 'DirectClusterEndpointToken',
  schema: DirectClusterEndpointTokenSchema,
  plural: 'directclusterendpointtokens',
  singular: 'directclusterendpointtoken',
  scope: 'Cluster',
  verbs: ['create'],
});

const PROJECT_MEMBERS = served({
  kind: 'ProjectMembers',
  schema: ProjectMembersSchema,
  plural: 'members',
  singular: 'members',
  scope: 'Cluster',
  verbs: ['get'],
  subresourceOf: { plural: 'projects', subresource: 'members' },
});

const VIRTUAL_CLUSTER_INSTANCE_KUBECONFIG = served({
  kind: 'VirtualClusterInstanceKubeConfig',
  schema: VirtualClusterInstanceKubeConfigSchema,
  plural: 'kubeconfig',
  singular: 'kubeconfig',
  scope: 'Namespaced',
  verbs: ['create'],
  subresourceOf: { plural: 'virtualclusterinstances', subresource: 'kubeconfig' },
});

const CONFIG = served({
  kind: 'Config',
  schema: ConfigSchema,
  plural: 'configs',
  singular: 'config',
  scope: 'Cluster',
  verbs: ['get', 'create', 'update'],
});

/** Every kind of the group, stored kinds first, each once. */
export const KINDS: readonly KindInfo[] = [
  SHARED_SECRET,
  OWNED_ACCESS_KEY,
  USER,
  TEAM,
  PROJECT,
  CLUSTER,
  VIRTUAL_CLUSTER_INSTANCE,
  VIRTUAL_CLUSTER_TEMPLATE,
  DIRECT_CLUSTER_ENDPOINT_TOKEN,
  PROJECT_MEMBERS,
  VIRTUAL_CLUSTER_INSTANCE_KUBECONFIG,
  CONFIG,
];

export const STORED_KINDS: readonly StoredKind[] = KINDS.filter((k): k is StoredKind => k.stored);

/** `<plural>.management.platform`, the CRD name and the kubectl resource name. */
export function crdName(info: Pick<KindInfo, 'plural'>): string {
  return `${info.plural}.${API_GROUP}`;
}

export { API_GROUP, API_VERSION, GROUP_VERSION };

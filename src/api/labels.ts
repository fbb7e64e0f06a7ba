/**
 * The labels, annotations and finalizers the platform writes and reads on objects: contracts
 * between its components (a controller writes them, admission guards them, the syncer and the
 * gateway read them) and with the people who set some of them. Values must not change once
 * released: objects in clusters carry them.
 */

/** On every object a controller creates. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'cluster-platform';

/** The finalizer of controllers whose cleanup garbage collection cannot do (a Project's namespace). */
export const CLEANUP_FINALIZER = 'management.platform/cleanup';

/** Label on a project's namespace and on the RoleBindings in it: the project's name. */
export const PROJECT_LABEL = 'management.platform/project';

/** Label on every Role and RoleBinding projected from a SharedSecret: the secret's uid. */
export const OWNER_UID_LABEL = 'management.platform/sharedsecret-uid';

/**
 * A core Secret carrying both labels is kept filled with a SharedSecret's data. Only Secrets
 * so labelled are ever written; the admission webhook admits the labels only for requesters
 * who may `get` the SharedSecret.
 */
export const SOURCE_NAME_LABEL = 'management.platform/sharedsecret-name';
export const SOURCE_NAMESPACE_LABEL = 'management.platform/sharedsecret-namespace';
/** Comma-separated keys to copy; all keys when absent. */
export const KEYS_ANNOTATION = 'management.platform/sharedsecret-keys';
/** `"true"` pauses the sync of this Secret (its data is left as it is). */
export const DISABLE_SYNC_ANNOTATION = 'management.platform/disable-sync';

/** Label on a virtual cluster syncer's ServiceAccount and RoleBindings: the instance's uid. */
export const INSTANCE_UID_LABEL = 'management.platform/virtualclusterinstance-uid';
/** Annotation on the same objects: `<namespace>/<name>` of the instance (maps them back to its key). */
export const INSTANCE_ANNOTATION = 'management.platform/virtualclusterinstance';

/**
 * Every syncer ServiceAccount's name starts with this: admission knows syncers by it (a tenant
 * naming its own ServiceAccount so only makes that one weaker).
 */
export const SYNCER_SERVICE_ACCOUNT_PREFIX = 'vcluster-syncer-';

/**
 * Sleep mode of a provisioned VirtualClusterInstance (issue 27). `last-activity`: RFC 3339 UTC time
 * (milliseconds) of the latest request through the access proxy, written by the gateway (throttled
 * while the instance is awake, at once while it sleeps: that write is the wake request) and by
 * `platform wake`. `sleep-requested`: RFC 3339 UTC time written by `platform sleep`; later than
 * the instance's last activity, the controller puts it to sleep at once.
 */
export const LAST_ACTIVITY_ANNOTATION = 'sleepmode.platform/last-activity';
export const SLEEP_REQUESTED_ANNOTATION = 'sleepmode.platform/sleep-requested';
/** Label `"true"` on each host object a sleeping instance's syncer wrote; removed on wake. */
export const SLEEPING_LABEL = 'sleepmode.platform/sleeping';

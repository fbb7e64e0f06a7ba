import { createHash } from 'node:crypto';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import { resources } from '../../api/resources.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import { isConflict, isNotFound } from '../../runtime/errors.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { collectionPath, objectPath } from '../../runtime/kube-client.ts';
import type { Manager } from '../../runtime/manager.ts';
import { commonIndexers, LabelIndex } from '../../runtime/store.ts';
import { LiveEntries } from './live-entries.ts';

/**
 * The OpenID provider's short-lived models (interactions, authorization codes, sessions, grants,
 * access tokens...) kept as Secrets in the platform namespace, so that every gateway replica sees
 * what another issued: a sign-in that starts on one replica finishes on any, and a restart ends
 * no session or grant. (Refresh tokens are OwnedAccessKeys: `store.ts`.)
 *
 * One Secret per entry, named after a hash of its id (ids are bearer values: codes, tokens), type
 * {@link OIDC_STATE_SECRET_TYPE}, labelled with its model, and with a hash of its grant and uid
 * for the lookups oidc-provider makes by them; the payload in `data.payload`, the expiry in an
 * annotation. An entry is always read from the apiserver, never answered from the informer: an
 * entry changes after it is made (an interaction gets its sign-in's result, a code is consumed),
 * and the next request of the same sign-in may come a moment after that write, to this replica or
 * another, before any watch has delivered it (a stale interaction sent the person back to the
 * login page). The informer serves what may lag: the names behind the grant and uid lookups, the
 * bound on live entries, and the expiry controller. Expired entries are never answered, and that
 * controller deletes them when they expire.
 *
 * Bounds: at most {@link ENTRIES_PER_MODEL} live entries per model across the replicas; beyond
 * that a new entry is refused (a flood of started sign-ins cannot grow etcd without bound).
 */

export const OIDC_STATE_SECRET_TYPE = 'management.platform/oidc-provider-state';
export const OIDC_MODEL_LABEL = 'management.platform/oidc-model';
const GRANT_LABEL = 'management.platform/oidc-grant';
const UID_LABEL = 'management.platform/oidc-uid';
const USER_CODE_LABEL = 'management.platform/oidc-user-code';
export const OIDC_EXPIRES_AT_ANNOTATION = 'management.platform/oidc-expires-at';

export const ENTRIES_PER_MODEL = 10_000;

interface StateSecret {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  type?: string;
  data?: Record<string, string>;
}

/** The model's label value and name part (`AuthorizationCode` -> `authorizationcode`). */
const modelKey = (model: string) => model.toLowerCase().replace(/[^a-z0-9]/g, '');
/** The model label of a stored entry. */
const modelOf = (secret: StateSecret) => secret.metadata.labels?.[OIDC_MODEL_LABEL] ?? '';
const digest = (value: string) => createHash('sha256').update(value).digest('hex').slice(0, 40);

/** The Secret name of an entry: the model and a hash of its id (the id itself is a bearer value). */
export const stateSecretName = (model: string, id: string) => `oidc-${modelKey(model)}-${digest(id)}`;

/** The Secret an entry is kept as (pure). */
export function stateSecret(input: {
  model: string;
  id: string;
  namespace: string;
  payload: AdapterPayload;
  expiresAt: number;
}): StateSecret {
  const { payload } = input;
  const labels: Record<string, string> = { [OIDC_MODEL_LABEL]: modelKey(input.model) };
  if (typeof payload.grantId === 'string') labels[GRANT_LABEL] = digest(payload.grantId);
  if (typeof payload.uid === 'string') labels[UID_LABEL] = digest(payload.uid);
  if (typeof payload.userCode === 'string') labels[USER_CODE_LABEL] = digest(payload.userCode);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: stateSecretName(input.model, input.id),
      namespace: input.namespace,
      labels,
      annotations: { [OIDC_EXPIRES_AT_ANNOTATION]: new Date(input.expiresAt).toISOString() },
    },
    type: OIDC_STATE_SECRET_TYPE,
    data: { payload: Buffer.from(JSON.stringify(payload)).toString('base64') },
  };
}

/** When an entry expires (ms since the epoch); 0 (expired) when the annotation is unreadable. */
export function stateExpiresAt(secret: StateSecret): number {
  const text = secret.metadata.annotations?.[OIDC_EXPIRES_AT_ANNOTATION];
  const time = text === undefined ? Number.NaN : Date.parse(text);
  return Number.isFinite(time) ? time : 0;
}

/** The payload of a live entry; undefined when expired, of another type, or unreadable. */
export function statePayload(secret: StateSecret, now: number): AdapterPayload | undefined {
  if (secret.type !== OIDC_STATE_SECRET_TYPE || stateExpiresAt(secret) <= now) return undefined;
  const encoded = secret.data?.payload;
  if (encoded === undefined) return undefined;
  try {
    const payload: unknown = JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'));
    return typeof payload === 'object' && payload !== null && !Array.isArray(payload)
      ? (payload as AdapterPayload)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The entry store is full for a model: the request that would add one fails. */
export class OidcStateFull extends Error {
  override readonly name = 'OidcStateFull';
}

/** A code or token was consumed twice at once (two replicas): the second use fails. */
export class OidcStateConsumed extends Error {
  override readonly name = 'OidcStateConsumed';
}

export interface SecretModelsOptions {
  readonly api: KubeApi;
  readonly namespace: string;
  readonly now?: () => number;
  readonly entriesPerModel?: number;
}

/** The Secrets of every short-lived model: one informer, one sweep; {@link model} gives each model's adapter. */
export class SecretModels {
  private readonly informer: Informer<StateSecret>;
  private readonly now: () => number;
  /** The cached entries of each model and their expiries, for the bound on live entries. */
  private readonly live = new LiveEntries();

  constructor(
    manager: Manager,
    private readonly options: SecretModelsOptions,
  ) {
    this.now = options.now ?? Date.now;
    // The lookups by grant and uid use the label index.
    this.informer = manager.informer<StateSecret>(
      resources.secrets,
      { namespace: options.namespace, labelSelector: OIDC_MODEL_LABEL },
      { [LabelIndex]: commonIndexers[LabelIndex]! },
    );
    const record = (secret: StateSecret) =>
      this.live.set(modelOf(secret), secret.metadata.name ?? '', stateExpiresAt(secret));
    this.informer.addEventHandler({
      onAdd: record,
      onUpdate: (old, secret) => {
        if (modelOf(old) !== modelOf(secret)) this.live.remove(modelOf(old), old.metadata.name ?? '');
        record(secret);
      },
      onDelete: (secret) => this.live.remove(modelOf(secret), secret.metadata.name ?? ''),
    });
    manager
      .controller({
        name: 'oidc-provider-state-expiry',
        needLeaderElection: false,
        reconcile: (key) => this.expire(key),
      })
      .watchPrimary(this.informer);
  }

  /** oidc-provider's adapter for `model`. */
  model(model: string): Adapter {
    return new SecretModel(this, model);
  }

  /**
   * The reconcile of the expiry controller: an entry that has expired is deleted, a live one looked
   * at again when it expires. Every replica runs it (a delete of a gone entry is no error).
   */
  private async expire(key: string): Promise<ReconcileResult | undefined> {
    const secret = this.informer.store.get(key);
    if (!secret) return undefined;
    const left = stateExpiresAt(secret) - this.now();
    if (left > 0) return { requeueAfter: left };
    await this.delete(secret.metadata.name ?? '');
    return undefined;
  }

  /** @internal The entry named `name`, as the apiserver has it now (see the module comment). */
  async read(name: string): Promise<StateSecret | undefined> {
    try {
      return await this.options.api.request<StateSecret>({ method: 'GET', path: this.path(name) });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * @internal The entries of a model with `label` = the hash of `value`, as the apiserver has them
   * now. `complete`: every one, listed by the apiserver (a revocation must miss none, however
   * recently written). Otherwise (a lookup of one, by a label unique to it): the ones the cache
   * names, each read again (an entry's labels never change), and listed only when the cache names
   * none yet.
   */
  async entriesBy(
    model: string,
    label: string,
    value: string,
    complete: boolean,
  ): Promise<readonly StateSecret[]> {
    const cached = complete
      ? []
      : this.informer.store
          .byIndex(LabelIndex, `${label}=${digest(value)}`)
          .filter((secret) => secret.metadata.labels?.[OIDC_MODEL_LABEL] === modelKey(model));
    if (cached.length > 0) {
      const current = await Promise.all(cached.map((secret) => this.read(secret.metadata.name ?? '')));
      return current.filter((secret): secret is StateSecret => secret !== undefined);
    }
    const list = await this.options.api.request<{ items?: StateSecret[] }>({
      method: 'GET',
      path: collectionPath(resources.secrets, this.options.namespace),
      query: { labelSelector: `${OIDC_MODEL_LABEL}=${modelKey(model)},${label}=${digest(value)}` },
    });
    return list.items ?? [];
  }

  /** @internal Writes an entry (server-side apply: created or replaced whole). */
  async write(model: string, id: string, payload: AdapterPayload, expiresInSeconds: number): Promise<void> {
    const name = stateSecretName(model, id);
    const limit = this.options.entriesPerModel ?? ENTRIES_PER_MODEL;
    if (
      !this.informer.store.getByName(this.options.namespace, name) &&
      this.live.full(modelKey(model), limit, this.now())
    ) {
      throw new OidcStateFull(`the OpenID provider holds ${limit} ${model} entries; try again later`);
    }
    const secret = stateSecret({
      model,
      id,
      namespace: this.options.namespace,
      payload,
      expiresAt: this.now() + expiresInSeconds * 1000,
    });
    await this.options.api.request({
      method: 'PATCH',
      path: this.path(name),
      contentType: 'application/apply-patch+yaml',
      query: { force: 'true' },
      body: secret,
    });
  }

  /** @internal Marks an entry consumed, once: a concurrent second consumption fails. */
  async consume(model: string, id: string): Promise<void> {
    const name = stateSecretName(model, id);
    const secret = await this.read(name);
    const payload = secret ? statePayload(secret, this.now()) : undefined;
    if (!secret || !payload) return;
    if (payload.consumed !== undefined) throw new OidcStateConsumed(`the ${model} was already used`);
    const consumed = { ...payload, consumed: Math.floor(this.now() / 1000) };
    try {
      await this.options.api.request({
        method: 'PATCH',
        path: this.path(name),
        contentType: 'application/merge-patch+json',
        body: {
          metadata: { resourceVersion: secret.metadata.resourceVersion },
          data: { payload: Buffer.from(JSON.stringify(consumed)).toString('base64') },
        },
      });
    } catch (err) {
      if (isConflict(err)) throw new OidcStateConsumed(`the ${model} was already used`);
      throw err;
    }
  }

  /** @internal */
  async delete(name: string): Promise<void> {
    try {
      await this.options.api.request({ method: 'DELETE', path: this.path(name) });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /** @internal */
  payloadOf(secret: StateSecret | undefined): AdapterPayload | undefined {
    return secret ? statePayload(secret, this.now()) : undefined;
  }

  private path(name: string): string {
    return objectPath(resources.secrets, this.options.namespace, name);
  }
}

/** One model's adapter over {@link SecretModels}. */
class SecretModel implements Adapter {
  constructor(
    private readonly models: SecretModels,
    private readonly name: string,
  ) {}

  upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
    return this.models.write(this.name, id, payload, expiresIn);
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    return this.models.payloadOf(await this.models.read(stateSecretName(this.name, id)));
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    return this.findBy(UID_LABEL, 'uid', uid);
  }

  async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
    return this.findBy(USER_CODE_LABEL, 'userCode', userCode);
  }

  consume(id: string): Promise<void> {
    return this.models.consume(this.name, id);
  }

  destroy(id: string): Promise<void> {
    return this.models.delete(stateSecretName(this.name, id));
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    for (const secret of await this.models.entriesBy(this.name, GRANT_LABEL, grantId, true)) {
      if (this.models.payloadOf(secret)?.grantId === grantId)
        await this.models.delete(secret.metadata.name ?? '');
    }
  }

  /** The live entry whose payload `field` is `value` (the label narrows, the payload decides: hashes may collide). */
  private async findBy(
    label: string,
    field: 'uid' | 'userCode',
    value: string,
  ): Promise<AdapterPayload | undefined> {
    for (const secret of await this.models.entriesBy(this.name, label, value, false)) {
      const payload = this.models.payloadOf(secret);
      if (payload?.[field] === value) return payload;
    }
    return undefined;
  }
}

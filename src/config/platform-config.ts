import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  type ConfigError,
  type ConfigStatus,
  PLATFORM_CONFIG_KEY,
  PLATFORM_CONFIG_SECRET,
  parseConfig,
  safeParseConfig,
} from '../api/config.ts';
import { resources } from '../api/resources.ts';
import type { Informer } from '../runtime/informer.ts';
import type { Manager } from '../runtime/manager.ts';

/**
 * The platform configuration as every component reads it: the Secret `platform-config` in the
 * platform namespace (key `config`), parsed once per resourceVersion.
 *
 * **The rule for an invalid configuration** (one for every component: controllers, webhooks,
 * gateway, `platform dev`): it is never applied. A component goes on with the last valid
 * configuration it read, or the defaults when it has read none since it started; it logs the
 * invalid one once (the number of issues, never the text, which may hold client secrets), and
 * the gateway's `configs/<name>` shows the stored text without a parsed `status`. Admission keeps
 * invalid configurations out; this rule covers one written while the webhook was not there.
 */

/** What the Secret holds, as stored. */
interface StoredPlatformConfig {
  /** The configuration text, or undefined when there is no Secret (or no `config` key). */
  readonly raw: string | undefined;
  readonly resourceVersion: string | undefined;
  /** Why the stored text is not in effect; undefined when it is valid. */
  readonly error: ConfigError | undefined;
}

/** The defaults: the configuration of an empty document. */
export const DEFAULT_PLATFORM_CONFIG: ConfigStatus = parseConfig('');

/** The configuration text a Secret holds. */
function configTextOf(secret: V1Secret | undefined): string | undefined {
  const encoded = secret?.data?.[PLATFORM_CONFIG_KEY];
  return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
}

interface PlatformConfigReaderOptions {
  /** Told once per stored resourceVersion that is invalid (with the number of issues). */
  readonly onInvalid?: (issues: number, resourceVersion: string | undefined) => void;
}

/**
 * Applies the rule to the Secrets it is shown (from an informer's cache or a read), remembering
 * the last valid configuration. Parses once per resourceVersion.
 */
export class PlatformConfigReader {
  private lastValid: ConfigStatus = DEFAULT_PLATFORM_CONFIG;
  /** The resourceVersion last shown (`null`: nothing shown yet; undefined: no Secret). */
  private seenVersion: string | undefined | null = null;
  private storedNow: StoredPlatformConfig = { raw: undefined, resourceVersion: undefined, error: undefined };

  constructor(private readonly options: PlatformConfigReaderOptions = {}) {}

  /** The configuration in effect once `secret` (undefined: none stored) is what is stored. */
  of(secret: V1Secret | undefined): ConfigStatus {
    const resourceVersion = secret?.metadata?.resourceVersion;
    if (resourceVersion === this.seenVersion) return this.lastValid;
    this.seenVersion = resourceVersion;
    const raw = configTextOf(secret);
    const parsed = safeParseConfig(raw ?? '');
    if (parsed.ok) {
      this.lastValid = raw === undefined ? DEFAULT_PLATFORM_CONFIG : parsed.config;
      this.storedNow = { raw, resourceVersion, error: undefined };
    } else {
      this.storedNow = { raw, resourceVersion, error: parsed.error };
      this.options.onInvalid?.(parsed.error.issues.length, resourceVersion);
    }
    return this.lastValid;
  }

  /** What was stored when {@link of} was last called. */
  stored(): StoredPlatformConfig {
    return this.storedNow;
  }
}

/** One source per process and platform namespace, shared by every component in it. */
export interface PlatformConfigSource {
  /** The configuration in effect (see the rule above). */
  current(): ConfigStatus;
  /** What the Secret holds now (the `configs` endpoint shows the text and its problems). */
  stored(): StoredPlatformConfig;
  /** The informer of the Secret (only that one Secret is cached), for controllers that watch it. */
  readonly informer: Informer<V1Secret>;
  /** Calls `listener` with the configuration in effect after every change of the Secret. */
  onChange(listener: (config: ConfigStatus) => void): void;
}

const sources = new WeakMap<Manager, Map<string, PlatformConfigSource>>();

/**
 * The platform-config source of `manager` for `platformNamespace`: created on first use (its
 * informer registered on the manager), the same object for every later caller.
 */
export function platformConfigSource(
  manager: Manager,
  platformNamespace: string,
  logger?: Logger,
): PlatformConfigSource {
  const byNamespace = sources.get(manager) ?? new Map<string, PlatformConfigSource>();
  sources.set(manager, byNamespace);
  const existing = byNamespace.get(platformNamespace);
  if (existing) return existing;
  const informer = manager.informer<V1Secret>(resources.secrets, {
    namespace: platformNamespace,
    fieldSelector: `metadata.name=${PLATFORM_CONFIG_SECRET}`,
  });
  const reader = new PlatformConfigReader({
    onInvalid: (issues) =>
      logger?.warn(
        { issues, secret: `${platformNamespace}/${PLATFORM_CONFIG_SECRET}` },
        'the platform config is invalid; the last valid one stays in effect',
      ),
  });
  const key = `${platformNamespace}/${PLATFORM_CONFIG_SECRET}`;
  const current = () => reader.of(informer.store.get(key));
  const listeners: ((config: ConfigStatus) => void)[] = [];
  const changed = () => {
    const config = current();
    for (const listener of listeners) listener(config);
  };
  informer.addEventHandler({ onAdd: changed, onUpdate: changed, onDelete: changed });
  const source: PlatformConfigSource = {
    current,
    stored: () => {
      current();
      return reader.stored();
    },
    informer,
    onChange: (listener) => {
      listeners.push(listener);
    },
  };
  byNamespace.set(platformNamespace, source);
  return source;
}

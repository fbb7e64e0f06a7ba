import type { V1Secret } from '@kubernetes/client-node';
import {
  type ConfigStatus,
  PLATFORM_CONFIG_KEY,
  PLATFORM_CONFIG_SECRET,
  parseConfig,
  safeParseConfig,
} from '../api/config.ts';
import type { Informer } from '../runtime/informer.ts';
import type { Manager } from '../runtime/manager.ts';
import { resources } from './resources.ts';

/** The informer of the platform configuration Secret (only that one Secret is cached). */
export function platformConfigInformer(manager: Manager, platformNamespace: string): Informer<V1Secret> {
  return manager.informer<V1Secret>(resources.secrets, {
    namespace: platformNamespace,
    fieldSelector: `metadata.name=${PLATFORM_CONFIG_SECRET}`,
  });
}

/** The configuration a Secret holds; a missing or invalid one is the defaults (admission keeps invalid ones out). */
export function configOfSecret(secret: V1Secret | undefined): ConfigStatus {
  const encoded = secret?.data?.[PLATFORM_CONFIG_KEY];
  const parsed = encoded ? safeParseConfig(Buffer.from(encoded, 'base64').toString('utf8')) : undefined;
  return parsed?.ok ? parsed.config : parseConfig('');
}

/**
 * The current platform configuration from the informer's cache, parsed once per resourceVersion:
 * a config change re-queues every object of a controller, which then all read the same parse.
 */
export function platformConfigReader(
  informer: Informer<V1Secret>,
  platformNamespace: string,
): () => ConfigStatus {
  let parsed: { resourceVersion: string | undefined; config: ConfigStatus } | undefined;
  return () => {
    const secret = informer.store.get(`${platformNamespace}/${PLATFORM_CONFIG_SECRET}`);
    const resourceVersion = secret?.metadata?.resourceVersion;
    if (!parsed || parsed.resourceVersion !== resourceVersion)
      parsed = { resourceVersion, config: configOfSecret(secret) };
    return parsed.config;
  };
}

import type { AuthConfig } from '../api/config-auth.ts';
import { CONNECTOR_ID_PATTERN, PROVIDER_SECTIONS } from '../api/config-warnings.ts';

/**
 * The sign-in methods a configuration offers, each with the id that names it in URLs
 * (`/auth/<id>/login`, `/auth/<id>/callback`). The top-level provider sections of `auth` get
 * their section name as id (`auth.oidc` is `oidc`); each entry of `auth.connectors` its own
 * `id`. A connector names one provider section; when it names several, the first of
 * {@link PROVIDER_SECTIONS} is used and the others are reported by the configuration warnings.
 * The cluster manager is a top-level section only.
 */

export const PROVIDER_KINDS = [...PROVIDER_SECTIONS, 'clusterManager'] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

type Sections = Pick<AuthConfig, ProviderKind>;
export type ProviderConfig<K extends ProviderKind> = NonNullable<Sections[K]>;

export type LoginMethod = {
  [K in ProviderKind]: {
    readonly kind: K;
    /** In URLs and in `identity.connector`. */
    readonly id: string;
    /** Shown on the login page. */
    readonly displayName: string;
    readonly config: ProviderConfig<K>;
  };
}[ProviderKind];

const DEFAULT_NAMES: Record<ProviderKind, string> = {
  oidc: 'OpenID Connect',
  saml: 'SAML',
  hostedGit: 'code hosting',
  hostedGitGroups: 'code hosting (groups)',
  idpA: 'web identity',
  idpB: 'enterprise identity',
  clusterManager: 'the cluster manager',
};

function methodOf(
  sections: Partial<Sections>,
  id: string,
  displayName: string | undefined,
): LoginMethod | undefined {
  for (const kind of PROVIDER_KINDS) {
    const config = sections[kind];
    if (config === undefined) continue;
    const fallback = kind === 'oidc' && sections.oidc?.type ? sections.oidc.type : DEFAULT_NAMES[kind];
    return { kind, id, displayName: displayName || fallback, config } as LoginMethod;
  }
  return undefined;
}

/**
 * Every configured single-sign-on method, supported or not, in configuration order (top-level
 * sections first). A connector whose id is not a usable path segment or repeats an id already
 * taken is left out (the configuration warnings name it).
 */
export function configuredMethods(auth: AuthConfig): LoginMethod[] {
  const methods: LoginMethod[] = [];
  const taken = new Set<string>();
  for (const kind of PROVIDER_KINDS) {
    const method = methodOf({ [kind]: auth[kind] }, kind, undefined);
    if (method) {
      methods.push(method);
      taken.add(kind);
    }
  }
  for (const connector of auth.connectors ?? []) {
    if (!CONNECTOR_ID_PATTERN.test(connector.id) || taken.has(connector.id)) continue;
    const method = methodOf(connector, connector.id, connector.displayName);
    if (method) {
      methods.push(method);
      taken.add(connector.id);
    }
  }
  return methods;
}

/** The methods a person can sign in with here (every configured one). */
export const loginMethods = configuredMethods;

export const passwordLoginEnabled = (auth: AuthConfig) => auth.password?.disabled !== true;

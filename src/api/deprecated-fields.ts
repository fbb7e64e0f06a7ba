import { isJsonObject } from '../runtime/json.ts';

/**
 * Fields the spec (`SPEC.md`) marks deprecated, which objects may still carry, and the warning
 * admission answers when one is set (kubectl prints it as `Warning: ...`). Every deprecated field
 * of the spec is warned about where it is admitted:
 *
 * - OwnedAccessKey `spec.parent` and `spec.oidcLogin`: here ({@link deprecatedFieldWarnings}).
 * - `scope.rules` and `scope.allowPlatformCli` (OwnedAccessKey and DirectClusterEndpointToken):
 *   `validateScope` in `src/authz/scope.ts`, answered by admission for keys and by the gateway's
 *   direct token endpoint; both still act (the rules narrow, allowPlatformCli is the role
 *   platform-cli).
 * - Config `devPodSubDomain`: `INERT_CONFIG_FIELDS` in `config-warnings.ts`. Config `oidc` is not
 *   warned about: it works (the platform as an OpenID provider, `src/login/oidc-provider/`).
 * - `metadata.selfLink`: kube-apiserver neither stores nor populates it; nothing of ours sees it.
 *
 * Warnings name the field, never its value (it may hold a token).
 */

interface DeprecatedField {
  /** Dotted path from the object's root, as kubectl users write it. */
  readonly path: string;
  /** What to use instead, or why there is nothing to use. */
  readonly instead: string;
  /** Why setting it changes nothing in this platform. */
  readonly effect: string;
}

const DEPRECATED_OWNED_ACCESS_KEY_FIELDS: readonly DeprecatedField[] = [
  {
    path: 'spec.parent',
    instead: 'each key carries its own sign-in data in spec.identity',
    effect: 'keys share no sign-in data; the platform never reads this field',
  },
  {
    path: 'spec.oidcLogin',
    instead: 'use spec.identity',
    effect:
      'the platform neither reads nor refreshes these tokens; its responses and audit events leave them out',
  },
];

/** The value at a dotted path, or undefined when a step is missing. */
function valueAt(object: unknown, path: string): unknown {
  let value: unknown = object;
  for (const step of path.split('.')) {
    if (!isJsonObject(value) || !Object.hasOwn(value, step)) return undefined;
    value = value[step];
  }
  return value;
}

/**
 * One warning per deprecated field set (not null) on an OwnedAccessKey object, as admission
 * answers it on create and update: `spec.parent: deprecated; has no effect in this platform (...)`.
 */
export function deprecatedFieldWarnings(object: unknown): string[] {
  return DEPRECATED_OWNED_ACCESS_KEY_FIELDS.filter(({ path }) => valueAt(object, path) != null).map(
    ({ path, instead, effect }) =>
      `${path}: deprecated; has no effect in this platform (${effect}); ${instead}`,
  );
}

/**
 * The public addresses of the hosted identity providers, as their documentation gives them. The
 * connectors use these unless the configuration names another host (`hostedGit.hostName`,
 * `hostedGitGroups.baseURL`, the cluster manager's `host`). Tests replace them with local servers
 * that answer as the providers document, and trust those servers' CA through `ca`.
 */
export interface ProviderAddresses {
  /** Code hosting (organizations and teams): its web origin (OAuth) and its REST API. */
  readonly hostedGit: { readonly web: string; readonly api: string };
  /** Code hosting (groups): its base URL, an OpenID provider. */
  readonly hostedGitGroups: { readonly baseURL: string };
  /** Web identity: the OpenID issuer and the directory API (groups). */
  readonly idpA: { readonly issuer: string; readonly directory: string };
  /** Enterprise identity: the login service (OAuth, per tenant) and the graph API. */
  readonly idpB: { readonly login: string; readonly graph: string };
  /** Extra roots (PEM) trusted for every provider connection, besides the system's (tests' local servers). */
  readonly ca?: string | undefined;
}

export const PUBLIC_PROVIDER_ADDRESSES: ProviderAddresses = {
  hostedGit: { web: 'https://github.com', api: 'https://api.github.com' },
  hostedGitGroups: { baseURL: 'https://gitlab.com' },
  idpA: { issuer: 'https://accounts.google.com', directory: 'https://admin.googleapis.com' },
  idpB: { login: 'https://login.microsoftonline.com', graph: 'https://graph.microsoft.com' },
};

/** `base` + `path` without doubled or missing slashes. */
export const joinUrl = (base: string, path: string) =>
  `${base.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;

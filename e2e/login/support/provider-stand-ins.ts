import type { ProviderAddresses } from '../../../src/login/providers.ts';
import { type ClusterManagerApi, startClusterManagerApi } from './cluster-manager-api.ts';
import { type HostedGitApi, startHostedGitApi } from './hosted-git-api.ts';
import { type IdpADirectory, startIdpADirectory } from './idp-a-directory.ts';
import { type IdpBApi, startIdpBApi } from './idp-b-api.ts';
import { testCa } from './local-https.ts';
import { startTestOidcProvider, type TestOidcProvider } from './oidc-provider.ts';

/**
 * The hosted providers, stood in for on loopback (none can be reached from a test):
 *
 * - the code-hosting provider with organizations: `hosted-git-api.ts`, answering as its REST API
 *   and OAuth web flow are documented;
 * - the code-hosting provider with groups: an OpenID provider, as the provider documents itself
 *   (discovery at its base URL), here the certified `oidc-provider` with the claims the provider
 *   documents (`nickname`, `groups` in UserInfo only);
 * - the web-identity provider: its OpenID provider as `oidc-provider` with its documented claims
 *   (`hd`, `email_verified`, `name`), and `idp-a-directory.ts` for its service-account token
 *   endpoint and directory API;
 * - the enterprise-identity provider: `idp-b-api.ts`, its v2 OAuth endpoints and graph API;
 * - the cluster manager: `cluster-manager-api.ts`, its v3 API.
 *
 * `addresses` points the platform's connectors at them, and trusts their CAs.
 */
export interface ProviderStandIns {
  readonly hostedGit: HostedGitApi;
  readonly hostedGitGroups: TestOidcProvider;
  readonly idpA: TestOidcProvider;
  readonly idpADirectory: IdpADirectory;
  readonly idpB: IdpBApi;
  readonly clusterManager: ClusterManagerApi;
  readonly addresses: ProviderAddresses;
  close(): Promise<void>;
}

/** Connector ids the stand-ins accept callbacks for (top-level sections and `connectors[]` ids). */
export const STAND_IN_CONNECTOR_IDS = [
  'hostedGit',
  'hosted-git-enterprise',
  'hostedGitGroups',
  'idpA',
  'idpB',
  'idp-b-tenant',
  'clusterManager',
];

export async function startProviderStandIns(platformUrl: string, caDir: string): Promise<ProviderStandIns> {
  const callbacks = STAND_IN_CONNECTOR_IDS.map((id) => `${platformUrl}/auth/${id}/callback`);
  const hostedGit = await startHostedGitApi(callbacks);
  const hostedGitGroups = await startTestOidcProvider({
    redirectUris: callbacks,
    caDir,
    claims: {
      openid: ['sub'],
      profile: ['name', 'nickname', 'preferred_username', 'groups', 'groups_direct'],
      email: ['email', 'email_verified'],
    },
    claimsInUserInfoOnly: true,
  });
  const idpA = await startTestOidcProvider({
    redirectUris: callbacks,
    caDir,
    claims: {
      openid: ['sub', 'hd'],
      email: ['email', 'email_verified'],
      profile: ['name', 'given_name', 'family_name', 'picture'],
    },
  });
  const idpADirectory = await startIdpADirectory(caDir);
  const idpB = await startIdpBApi(callbacks);
  const clusterManager = await startClusterManagerApi();
  const ca = [(await testCa()).certPem, hostedGitGroups.caPem, idpA.caPem].join('\n');
  return {
    hostedGit,
    hostedGitGroups,
    idpA,
    idpADirectory,
    idpB,
    clusterManager,
    addresses: {
      hostedGit: { web: hostedGit.url, api: `${hostedGit.url}/api/v3` },
      hostedGitGroups: { baseURL: hostedGitGroups.issuer },
      idpA: { issuer: idpA.issuer, directory: idpADirectory.url },
      idpB: { login: idpB.url, graph: idpB.url },
      ca,
    },
    close: async () => {
      await Promise.all([
        hostedGit.close(),
        hostedGitGroups.close(),
        idpA.close(),
        idpADirectory.close(),
        idpB.close(),
        clusterManager.close(),
      ]);
    },
  };
}

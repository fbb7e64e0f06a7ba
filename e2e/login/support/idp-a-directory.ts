import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { importSPKI, jwtVerify } from 'jose';
import { bearer, json, type LocalHttps, readBody, startLocalHttps } from './local-https.ts';

/**
 * A local server that answers as the web-identity provider documents the two services the
 * platform uses besides its OpenID provider:
 *
 * - its OAuth token endpoint for service accounts (`token_uri` of the service-account key file):
 *   `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` with an RS256 `assertion` signed by
 *   the account's key (`iss` the account's `client_email`, `sub` the user it acts for, `aud` the
 *   token URI, `scope`, `iat`/`exp` at most an hour apart) → `{access_token, expires_in, token_type}`;
 * - the directory API `GET /admin/directory/v1/groups?userKey=<email>`: `{kind, groups: [{id,
 *   email, name}], nextPageToken}` (pages of `maxResults`, default 200; here 2 to make paging
 *   happen), for a token with the `admin.directory.group.readonly` scope acting for an admin.
 *
 * The service-account key file it writes is the one the platform's `serviceAccountFilePath`
 * names. A stand-in: these calls only.
 */

const DIRECTORY_SCOPE = 'https://www.googleapis.com/auth/admin.directory.group.readonly';
const PAGE_SIZE = 2;

export interface IdpADirectory extends LocalHttps {
  readonly serviceAccountFile: string;
  readonly adminEmail: string;
  /** Group emails of each user email. */
  readonly memberships: Map<string, string[]>;
  /** Assertions seen (their `sub`), to assert the platform acted for the admin. */
  readonly actedFor: string[];
}

export async function startIdpADirectory(dir: string): Promise<IdpADirectory> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const verifyKey = await importSPKI(publicKey.export({ format: 'pem', type: 'spki' }).toString(), 'RS256');
  const clientEmail = 'platform-directory@project.iam.example';
  const adminEmail = 'admin@example.com';
  const memberships = new Map<string, string[]>();
  const tokens = new Set<string>();
  const actedFor: string[] = [];
  let tokenUri = '';

  const server = await startLocalHttps(async (req, res, url) => {
    if (url.pathname === '/token' && req.method === 'POST') {
      const form = new URLSearchParams(await readBody(req));
      if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer')
        return json(res, 400, { error: 'unsupported_grant_type' });
      try {
        const { payload } = await jwtVerify(form.get('assertion') ?? '', verifyKey, {
          issuer: clientEmail,
          audience: tokenUri,
          algorithms: ['RS256'],
          maxTokenAge: '1h',
        });
        if (payload.scope !== DIRECTORY_SCOPE || typeof payload.sub !== 'string')
          return json(res, 400, { error: 'invalid_scope' });
        if ((payload.exp ?? 0) - (payload.iat ?? 0) > 3600) return json(res, 400, { error: 'invalid_grant' });
        actedFor.push(payload.sub);
        if (payload.sub !== adminEmail) return json(res, 401, { error: 'unauthorized_client' });
      } catch {
        return json(res, 400, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' });
      }
      const token = `ya29.${randomBytes(24).toString('hex')}`;
      tokens.add(token);
      return json(res, 200, { access_token: token, expires_in: 3599, token_type: 'Bearer' });
    }
    if (url.pathname === '/admin/directory/v1/groups' && req.method === 'GET') {
      if (!tokens.has(bearer(req) ?? ''))
        return json(res, 401, { error: { code: 401, message: 'Invalid Credentials' } });
      const userKey = url.searchParams.get('userKey') ?? '';
      const all = memberships.get(userKey) ?? [];
      const start = Number(url.searchParams.get('pageToken') ?? '0') || 0;
      const groups = all.slice(start, start + PAGE_SIZE).map((email, i) => ({
        kind: 'admin#directory#group',
        id: `0${start + i}`,
        email,
        name: email.split('@')[0],
      }));
      return json(res, 200, {
        kind: 'admin#directory#groups',
        groups,
        ...(start + PAGE_SIZE < all.length ? { nextPageToken: String(start + PAGE_SIZE) } : {}),
      });
    }
    json(res, 404, { error: { code: 404, message: 'Not Found' } });
  });
  tokenUri = `${server.url}/token`;
  const serviceAccountFile = join(dir, 'service-account.json');
  writeFileSync(
    serviceAccountFile,
    JSON.stringify({
      type: 'service_account',
      project_id: 'project',
      private_key_id: randomBytes(20).toString('hex'),
      private_key: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
      client_email: clientEmail,
      client_id: '1234567890',
      token_uri: tokenUri,
    }),
    { mode: 0o600 },
  );
  return { ...server, serviceAccountFile, adminEmail, memberships, actedFor };
}

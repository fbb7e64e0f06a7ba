import { badRequest, StatusError, successStatus } from '../api/status.ts';
import type { RequestAttributes } from '../authz/attributes.ts';
import type { Endpoint, EndpointAnswer, EndpointRequest } from '../http/endpoint.ts';
import { setOwnValue } from '../runtime/json.ts';
import type { LoginEndpoints } from './endpoints.ts';
import { AUTH_BASE, type LoginHttpRequest, type LoginHttpResponse, refusalStatus } from './http-answers.ts';
import { LoginRefused } from './identity.ts';
import type { PasswordApi } from './password-api.ts';
import { NewPasswordRejected } from './service.ts';

/**
 * The login endpoints on the platform's endpoint interface (`src/http/endpoint.ts`), for the
 * gateway to serve: everything under `/auth` without a key (pages, forms, callbacks), `/auth/logout`
 * with the caller's key (the key that ends is the one calling), and the password API
 * `/auth/users/<user>/password` with a key, seen by scope checks and audit as `update` of
 * `users/password`. The client address and `secure` come from the gateway's pipeline (trusted
 * proxies applied); requests and answers hold credentials, so audit never records their bodies.
 */

/** What the login endpoints need of `LoginEndpoints`: one answer per endpoint under `/auth`. */
export type LoginHandler = Pick<
  LoginEndpoints,
  'loginPage' | 'passwordSignIn' | 'changePassword' | 'signOut' | 'connectorSignIn' | 'answerHeaders'
>;

export const PASSWORD_API_PREFIX = `${AUTH_BASE}/users`;
const PASSWORD_PATH = /^\/auth\/users\/([^/]+)\/password$/;

/** The request's headers, lists joined; every name a key of its own (`__proto__` too). */
function headersOf(request: EndpointRequest): Record<string, string | undefined> {
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(request.headers))
    setOwnValue(headers, name, Array.isArray(value) ? value.join(', ') : value);
  return headers;
}

function loginRequest(request: EndpointRequest, caller?: LoginHttpRequest['caller']): LoginHttpRequest {
  const query = request.query.toString();
  return {
    method: request.method,
    url: query ? `${request.path}?${query}` : request.path,
    headers: headersOf(request),
    body: request.body.length > 0 ? Buffer.from(request.body).toString('utf8') : undefined,
    source: request.source,
    secure: request.secure,
    caller,
  };
}

function answerOf(response: LoginHttpResponse | undefined): EndpointAnswer {
  if (!response) throw new StatusError(404, 'NotFound', 'there is no such sign-in page');
  const { 'content-type': contentType, ...headers } = response.headers;
  return {
    code: response.status,
    headers,
    body: response.body,
    contentType: typeof contentType === 'string' ? contentType : 'text/plain; charset=utf-8',
  };
}

/** The user a password API path names (undefined for any other path). */
export function passwordApiUser(path: string): string | undefined {
  const match = PASSWORD_PATH.exec(path);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[1] as string);
  } catch {
    return undefined;
  }
}

/** How scope checks and audit see a password API request: `update` of `users/password` of the user. */
export function passwordApiAttributes(method: string, path: string): RequestAttributes {
  return {
    target: 'Management',
    verb: method === 'POST' ? 'update' : method.toLowerCase(),
    resourceRequest: true,
    apiGroup: 'management.platform',
    resource: 'users',
    subresource: 'password',
    name: passwordApiUser(path) ?? '',
    namespace: '',
    path,
  };
}

/** A refusal of the password API as a Kubernetes Status (field causes for a rejected password). */
function passwordStatus(err: unknown): StatusError {
  if (err instanceof StatusError) return err;
  if (err instanceof NewPasswordRejected)
    return new StatusError(422, 'Invalid', err.message, {
      causes: [{ reason: 'FieldValueInvalid', field: 'password', message: err.message }],
    });
  if (err instanceof LoginRefused) return refusalStatus(err);
  throw err;
}

/**
 * The endpoints under `/auth`, each registered in the gateway's table: the login page, the
 * password form and change, sign out, the single sign-on steps of every connector
 * (`/auth/<id>/login|callback`, one prefix endpoint that answers any other path below `/auth`
 * 404), and the password API.
 */
export function loginHttpEndpoints(login: LoginHandler, passwords: PasswordApi): Endpoint[] {
  // On every answer, the gateway's own refusals (401, 403, 405, 429) included.
  const answerHeaders = () => login.answerHeaders();
  /** A page or form served without a key at exactly `path`. */
  const publicPage = (
    name: string,
    path: string,
    method: 'GET' | 'POST',
    answer: (request: LoginHttpRequest) => Promise<LoginHttpResponse | undefined>,
  ): Endpoint => ({
    name,
    answerHeaders,
    route: { kind: 'path', path: `${AUTH_BASE}${path}`, methods: [method] },
    authentication: 'none',
    sensitive: true,
    handle: async (request) => answerOf(await answer(loginRequest(request))),
  });
  return [
    publicPage('login-page', '/login', 'GET', (request) => login.loginPage(request)),
    publicPage('password-login', '/password/login', 'POST', (request) => login.passwordSignIn(request)),
    publicPage('password-change', '/password/change', 'POST', (request) => login.changePassword(request)),
    {
      name: 'connector-sign-in',
      answerHeaders,
      route: { kind: 'path', path: AUTH_BASE, prefix: true, methods: ['GET', 'POST'] },
      authentication: 'none',
      sensitive: true,
      handle: async (request) => answerOf(await login.connectorSignIn(loginRequest(request))),
    },
    {
      name: 'logout',
      answerHeaders,
      route: { kind: 'path', path: `${AUTH_BASE}/logout`, methods: ['POST'] },
      authentication: 'key',
      // Any key may end itself, whatever it may do otherwise.
      scope: 'any',
      sensitive: true,
      handle: async (request) => {
        const identity = request.identity;
        const caller =
          identity?.kind === 'User' ? { user: identity.name, keyName: identity.accessKey.name } : undefined;
        return answerOf(await login.signOut(loginRequest(request, caller)));
      },
    },
    {
      name: 'password',
      answerHeaders,
      route: {
        kind: 'path',
        path: PASSWORD_API_PREFIX,
        prefix: true,
        methods: ['POST'],
        attributes: passwordApiAttributes,
      },
      authentication: 'key',
      sensitive: true,
      handle: async (request) => {
        const user = passwordApiUser(request.path);
        const identity = request.identity;
        if (!user || !identity)
          throw new StatusError(404, 'NotFound', 'use POST /auth/users/<user>/password');
        const body = request.object();
        if (typeof body.password !== 'string')
          throw badRequest('the body needs "password" (and "oldPassword" to change your own)');
        try {
          await passwords.setPassword(identity, user, body, request.source);
        } catch (err) {
          throw passwordStatus(err);
        }
        return { code: 200, object: successStatus(`the password of user "${user}" is set`) };
      },
    },
  ];
}

import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as samlify from 'samlify';
import { createCertificateAuthority, issueCertificate } from '../../../src/pki/certificates.ts';

/**
 * A SAML 2.0 identity provider for the tests, built on samlify (an implementation independent of
 * the platform's @node-saml, so the two meet only through the protocol): it reads the platform's
 * AuthnRequest (HTTP-Redirect binding) at `/sso`, shows a plain login form (username only: the
 * provider's authentication is not what is tested), and answers with a signed Response through
 * the HTTP-POST binding (an auto-submitting form to the ACS the SP metadata names).
 *
 * `issue` builds a response directly, with the deviations the attack tests need: expired,
 * unsigned, another audience, another InResponseTo.
 */

export interface SamlAccount {
  readonly nameID: string;
  /**
   * Attribute values: text, or `{ elements }`, XML placed as is inside one AttributeValue (a
   * structured value with child elements, as some directories send).
   */
  readonly attributes: Record<string, string | string[] | { readonly elements: string }>;
}

export interface IssueOptions {
  readonly inResponseTo: string;
  readonly account: string;
  readonly expired?: boolean;
  readonly unsigned?: boolean;
  readonly audience?: string;
  readonly destination?: string;
}

/** An AuthnRequest as the identity provider read it. */
export interface ReceivedAuthnRequest {
  readonly id: string;
  /** The service provider's entity id (`<saml:Issuer>`). */
  readonly issuer: string;
  /** `<samlp:NameIDPolicy Format>`, when asked for. */
  readonly nameIDFormat: string | undefined;
}

export interface TestSamlIdp {
  readonly ssoUrl: string;
  /** The AuthnRequests received at `/sso`, oldest first. */
  readonly requests: ReceivedAuthnRequest[];
  readonly entityId: string;
  /** base64 of the signing certificate's PEM (the platform's `caData`). */
  readonly caData: string;
  readonly accounts: Map<string, SamlAccount>;
  /** Registers the platform's SP metadata (node-saml's). */
  registerServiceProvider(metadataXml: string): void;
  /** A base64 SAMLResponse for the registered SP. */
  issue(options: IssueOptions): Promise<string>;
  close(): Promise<void>;
}

const escapeXml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] ?? c,
  );

/** The service provider's assertion consumer service of the HTTP-POST binding (samlify names bindings by key). */
function acsOf(sp: ReturnType<typeof samlify.ServiceProvider> | undefined): string {
  const acs = sp?.entityMeta.getAssertionConsumerService('post');
  if (typeof acs !== 'string' || acs === '') throw new Error('the service provider has no HTTP-POST ACS');
  return acs;
}

// The test IdP parses only AuthnRequests the platform itself built; schema validation (an XSD
// engine) is the IdP's concern, not the platform's, so it is not run here.
samlify.setSchemaValidator({ validate: async () => 'skipped' });

export async function startTestSamlIdp(): Promise<TestSamlIdp> {
  const ca = await createCertificateAuthority('test-saml-ca', 3600);
  const signing = await issueCertificate(ca, {
    commonName: 'saml-idp',
    usage: 'server',
    validForSeconds: 3600,
  });
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const entityId = `${base}/metadata`;
  const idp = samlify.IdentityProvider({
    entityID: entityId,
    signingCert: signing.certPem,
    privateKey: signing.keyPem,
    singleSignOnService: [
      { Binding: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect', Location: `${base}/sso` },
    ],
  });
  const accounts = new Map<string, SamlAccount>();
  const requests: ReceivedAuthnRequest[] = [];
  let sp: ReturnType<typeof samlify.ServiceProvider> | undefined;

  async function issue(options: IssueOptions): Promise<string> {
    if (!sp) throw new Error('no service provider registered');
    const account = accounts.get(options.account);
    if (!account) throw new Error(`unknown account ${options.account}`);
    const acs = acsOf(sp);
    const now = Date.now();
    const at = (ms: number) => new Date(ms).toISOString();
    const notOnOrAfter = options.expired ? at(now - 60 * 60_000) : at(now + 5 * 60_000);
    const notBefore = options.expired ? at(now - 2 * 60 * 60_000) : at(now - 60_000);
    const attributes = Object.entries(account.attributes)
      .map(
        ([name, value]) =>
          `<saml:Attribute Name="${escapeXml(name)}">${
            typeof value === 'object' && !Array.isArray(value)
              ? `<saml:AttributeValue>${value.elements}</saml:AttributeValue>`
              : (Array.isArray(value) ? value : [value])
                  .map(
                    (v) => `<saml:AttributeValue xsi:type="xs:string">${escapeXml(v)}</saml:AttributeValue>`,
                  )
                  .join('')
          }</saml:Attribute>`,
      )
      .join('');
    const { context } = (await idp.createLoginResponse(
      sp,
      { extract: { request: { id: options.inResponseTo } } } as never,
      'post',
      {},
      (template: string) => {
        const values: Record<string, string> = {
          ID: `_${randomBytes(16).toString('hex')}`,
          AssertionID: `_${randomBytes(16).toString('hex')}`,
          Destination: options.destination ?? acs,
          Audience: options.audience ?? sp?.entityMeta.getEntityID() ?? '',
          SubjectRecipient: acs,
          Issuer: entityId,
          IssueInstant: options.expired ? notBefore : at(now),
          StatusCode: 'urn:oasis:names:tc:SAML:2.0:status:Success',
          ConditionsNotBefore: notBefore,
          ConditionsNotOnOrAfter: notOnOrAfter,
          SubjectConfirmationDataNotOnOrAfter: notOnOrAfter,
          // The format the request asked for, as an identity provider answers.
          NameIDFormat:
            requests.find((request) => request.id === options.inResponseTo)?.nameIDFormat ??
            'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
          NameID: escapeXml(account.nameID),
          InResponseTo: escapeXml(options.inResponseTo),
          AuthnStatement: `<saml:AuthnStatement AuthnInstant="${at(now)}" SessionIndex="_s1"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:unspecified</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>`,
          AttributeStatement: attributes
            ? `<saml:AttributeStatement>${attributes}</saml:AttributeStatement>`
            : '',
        };
        return {
          id: values.ID ?? '',
          context: template.replace(/\{(\w+)\}/g, (_m, tag: string) => values[tag] ?? ''),
        };
      },
    )) as { context: string };
    if (!options.unsigned) return context;
    const xml = Buffer.from(context, 'base64').toString('utf8');
    return Buffer.from(xml.replace(/<ds:Signature[\s\S]*?<\/ds:Signature>/g, ''), 'utf8').toString('base64');
  }

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const url = new URL(req.url ?? '/', base);
      try {
        if (url.pathname === '/sso' && req.method === 'GET') {
          if (!sp) throw new Error('no service provider registered');
          const query = Object.fromEntries(url.searchParams);
          const parsed = await idp.parseLoginRequest(sp, 'redirect', { query, octetString: '' } as never);
          const extract = parsed.extract as {
            request: { id: string };
            issuer?: string;
            nameIDPolicy?: { format?: string };
          };
          const requestId = extract.request.id;
          requests.push({
            id: requestId,
            issuer: extract.issuer ?? '',
            nameIDFormat: extract.nameIDPolicy?.format,
          });
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
            `<!doctype html><title>Test SAML identity provider</title><h1>Test SAML identity provider</h1>
<form method="post" action="/sso"><input type="hidden" name="request" value="${escapeXml(requestId)}">
<label>Username <input name="username" autofocus></label> <button type="submit">Sign in</button></form>`,
          );
          return;
        }
        if (url.pathname === '/sso' && req.method === 'POST') {
          const form = await new Promise<URLSearchParams>((resolve) => {
            let body = '';
            req.on('data', (chunk: Buffer) => {
              body += chunk.toString('utf8');
            });
            req.on('end', () => resolve(new URLSearchParams(body)));
          });
          const response = await issue({
            inResponseTo: form.get('request') ?? '',
            account: form.get('username') ?? '',
          });
          const acs = acsOf(sp);
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
            `<!doctype html><title>Signing in</title><body onload="document.forms[0].submit()">
<form method="post" action="${escapeXml(acs)}"><input type="hidden" name="SAMLResponse" value="${response}"><noscript><button>Continue</button></noscript></form></body>`,
          );
          return;
        }
        res.writeHead(404).end();
      } catch (err) {
        if (res.headersSent) res.destroy(err as Error);
        else res.writeHead(400, { 'content-type': 'text/plain' }).end(String((err as Error).message));
      }
    })();
  });

  return {
    ssoUrl: `${base}/sso`,
    requests,
    entityId,
    caData: Buffer.from(signing.certPem, 'utf8').toString('base64'),
    accounts,
    registerServiceProvider(metadataXml: string) {
      sp = samlify.ServiceProvider({ metadata: metadataXml });
    },
    issue,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

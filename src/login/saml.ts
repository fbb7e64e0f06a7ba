import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SAML, type SamlConfig } from '@node-saml/node-saml';
import { DOMParser } from '@xmldom/xmldom';
import { SAML_TRANSIENT_NAME_ID_REASON, samlTransientNameId } from '../api/config-warnings.ts';
import { ConnectorMisconfigured, ProviderLoginFailed } from './code-flow.ts';
import type { ProviderConfig } from './connectors.ts';
import { type ExternalIdentity, identityFromSaml, LoginRefused } from './identity.ts';
import type { SsoCallback, SsoConnector, SsoStart } from './sso.ts';

/**
 * A SAML 2.0 service provider for one connector, through @node-saml/node-saml: the AuthnRequest
 * (HTTP-Redirect binding to `ssoURL`, Issuer `entityIssuer` or else `redirectURI`, the requested
 * NameID format `nameIDPolicyFormat`), and the Response at the ACS (`redirectURI`, HTTP-POST):
 * the signature of the response or of its assertion checked against `caData`/`ca` (unsigned
 * assertions are always refused: `insecureSkipSignatureValidation` is accepted with a warning and
 * has no effect), the audience (`entityIssuer`, else `redirectURI`), the issuer (`ssoIssuer`),
 * the validity window, and here: the Destination and Recipient equal to `redirectURI` when
 * present, and the assertion answering the request this browser started (InResponseTo, from the
 * sealed transaction, so unsolicited responses are refused on every replica alike).
 */

type SamlProviderConfig = ProviderConfig<'saml'>;

export interface SamlTransaction {
  /** The AuthnRequest's ID the response must answer. */
  readonly requestId: string;
}

/** Clock difference tolerated between the identity provider and the platform. */
const CLOCK_SKEW_MS = 30_000;

/** The certificates that may sign responses: `caData` (base64 of PEM or DER) and `ca` (PEM text or a file path). */
export function signingCertificates(config: SamlProviderConfig): string[] {
  const certs: string[] = [];
  const fromPem = (pem: string) =>
    [...pem.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)].map((m) => m[0]);
  if (config.caData) {
    const decoded = Buffer.from(config.caData, 'base64');
    const text = decoded.toString('utf8');
    certs.push(...(text.includes('BEGIN CERTIFICATE') ? fromPem(text) : [decoded.toString('base64')]));
  }
  if (config.ca) {
    const text = config.ca.includes('BEGIN CERTIFICATE') ? config.ca : readFileSync(config.ca, 'utf8');
    certs.push(...fromPem(text));
  }
  return certs;
}

const attributeOf = (xml: string, localName: string, attribute: string): string | null => {
  const doc = new DOMParser().parseFromString(xml, 'text/xml');
  const elements = doc.getElementsByTagNameNS('*', localName);
  const element = elements.length > 0 ? elements.item(0) : null;
  return element?.getAttribute(attribute) || null;
};

export class SamlConnector implements SsoConnector {
  constructor(
    readonly id: string,
    private readonly config: SamlProviderConfig,
  ) {}

  private saml(requestId?: string): SAML {
    const { redirectURI, ssoURL } = this.config;
    const certs = (() => {
      try {
        return signingCertificates(this.config);
      } catch {
        return [];
      }
    })();
    if (!redirectURI || !ssoURL || certs.length === 0)
      throw new ConnectorMisconfigured(
        `sign-in through "${this.id}" needs redirectURI, ssoURL and a signing certificate in caData or ca`,
      );
    if (samlTransientNameId(this.config))
      throw new ConnectorMisconfigured(
        `sign-in through "${this.id}" is refused: ${SAML_TRANSIENT_NAME_ID_REASON}`,
      );
    const audience = this.config.entityIssuer || redirectURI;
    const options: SamlConfig = {
      callbackUrl: redirectURI,
      entryPoint: ssoURL,
      issuer: audience,
      audience,
      idpCert: certs,
      identifierFormat: this.config.nameIDPolicyFormat,
      wantAuthnResponseSigned: false,
      wantAssertionsSigned: false,
      acceptedClockSkewMs: CLOCK_SKEW_MS,
      disableRequestedAuthnContext: true,
      ...(this.config.ssoIssuer ? { idpIssuer: this.config.ssoIssuer } : {}),
      ...(requestId ? { generateUniqueId: () => requestId } : {}),
    };
    return new SAML(options);
  }

  /** The identity provider's URL (HTTP-Redirect binding) and the transaction to keep. */
  async start(): Promise<SsoStart> {
    const requestId = `_${randomBytes(20).toString('hex')}`;
    const url = await this.saml(requestId).getAuthorizeUrlAsync('', undefined, {});
    const transaction: SamlTransaction = { requestId };
    return { redirect: new URL(url), transaction };
  }

  /** Validates the posted `SAMLResponse` for this transaction and returns the identity it asserts. */
  async finish(callback: SsoCallback, started: unknown): Promise<ExternalIdentity> {
    const samlResponse = callback.form.get('SAMLResponse') ?? undefined;
    const transaction = started as SamlTransaction;
    if (!samlResponse) throw new ProviderLoginFailed('the identity provider sent no SAML response');
    const saml = this.saml();
    let profile: Awaited<ReturnType<SAML['validatePostResponseAsync']>>['profile'];
    try {
      ({ profile } = await saml.validatePostResponseAsync({ SAMLResponse: samlResponse }));
    } catch (err) {
      if (err instanceof LoginRefused) throw err;
      throw new ProviderLoginFailed(
        'the SAML response was refused (signature, issuer, audience or validity)',
      );
    }
    if (!profile) throw new ProviderLoginFailed('the SAML response holds no assertion');
    const redirectURI = this.config.redirectURI as string;
    const responseXml = profile.getSamlResponseXml?.() ?? '';
    const destination = attributeOf(responseXml, 'Response', 'Destination');
    if (destination !== null && destination !== redirectURI)
      throw new ProviderLoginFailed('the SAML response is addressed to another destination');
    // From the signed assertion only: the response's own attributes may be unsigned.
    const assertionXml = profile.getAssertionXml?.() ?? '';
    const recipient = attributeOf(assertionXml, 'SubjectConfirmationData', 'Recipient');
    if (recipient !== null && recipient !== redirectURI)
      throw new ProviderLoginFailed('the SAML assertion is addressed to another recipient');
    const inResponseTo = attributeOf(assertionXml, 'SubjectConfirmationData', 'InResponseTo');
    if (inResponseTo !== transaction.requestId)
      throw new ProviderLoginFailed('the SAML assertion does not answer the sign-in started in this browser');
    const attributes = (profile.attributes ?? {}) as Record<string, unknown>;
    return identityFromSaml(this.id, { nameID: profile.nameID, attributes }, this.config);
  }

  /** The service provider metadata to register with the identity provider. */
  metadata(): string {
    return this.saml().generateServiceProviderMetadata(null, null);
  }
}

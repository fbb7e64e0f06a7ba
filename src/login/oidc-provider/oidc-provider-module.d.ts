// Minimal types for the parts of oidc-provider (which ships none) the platform and its tests use.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';
  export interface KoaContext {
    path: string;
    method: string;
    body: unknown;
    status: number;
    oidc?: { client?: { clientId: string } };
  }
  export interface GrantInstance {
    addOIDCScope(scope: string): void;
    addOIDCClaims(claims: string[]): void;
    addResourceScope(indicator: string, scope: string): void;
    save(): Promise<string>;
  }
  /** The storage of one model (`RefreshToken`, `AuthorizationCode`, `Session`, ...): oidc-provider's adapter contract. */
  export interface AdapterPayload extends Record<string, unknown> {
    readonly grantId?: string;
    readonly uid?: string;
    readonly userCode?: string;
    readonly consumed?: number;
  }
  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }
  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    use(middleware: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void;
    on(event: string, listener: (...args: unknown[]) => void): void;
    interactionDetails(
      req: IncomingMessage,
      res: ServerResponse,
    ): Promise<{
      uid: string;
      prompt: { name: string };
      params: Record<string, unknown>;
      session?: { accountId: string };
    }>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: Record<string, unknown>,
      options?: Record<string, unknown>,
    ): Promise<void>;
    Grant: new (fields: {
      accountId: string;
      clientId: string;
    }) => GrantInstance;
    Client: { prototype: { redirectUriAllowed(uri: string): boolean; redirectUris?: string[] } };
    proxy: boolean;
  }
}

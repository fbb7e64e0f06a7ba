// Minimal types for the parts of oidc-provider (which ships none) the test provider uses.
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
  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    use(middleware: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void;
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
    proxy: boolean;
  }
}

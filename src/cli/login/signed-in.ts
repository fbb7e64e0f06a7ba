import { readFileSync } from 'node:fs';
import { Agent } from 'undici';

/** What a sign-in of `platform login` ends with, however it went (password, browser, pasted code). */
export interface SignedIn {
  readonly key: string;
  readonly keyName: string;
  readonly user: string;
  /** The management API URL for the kubeconfig. */
  readonly server: string;
}

export interface TlsOptions {
  readonly caFile?: string | undefined;
  readonly insecure?: boolean | undefined;
}

/** The HTTP dispatcher for the platform: trusting `--certificate-authority`, or verifying nothing when told. */
export const dispatcherFor = (tls: TlsOptions) =>
  new Agent({
    connect: {
      ...(tls.caFile ? { ca: readFileSync(tls.caFile, 'utf8') } : {}),
      ...(tls.insecure ? { rejectUnauthorized: false } : {}),
    },
  });

/** The platform URL without trailing slashes, to put paths after. */
export const platformBase = (url: string) => url.replace(/\/+$/, '');

import { X509Certificate } from 'node:crypto';
import { stringify as toYaml } from 'yaml';
import {
  type CertificateAndKey,
  createCertificateAuthority,
  createRsaKeyPair,
  issueCertificate,
} from '../pki/certificates.ts';
import { caProblem, certificateWithKey, type RenewBefore, servingProblem } from '../pki/planning.ts';
import { ownValue } from '../runtime/json.ts';
import { ADMIN_KEYS, PKI_KEYS, servingNamesOf } from './control-plane.ts';

/**
 * A provisioned virtual cluster's PKI, kept as the data of two Secrets in the instance's
 * namespace (control-plane.ts `secretNameOf`):
 *
 * - `pki`: the instance's own CA (certificate and key: the controller manager signs the
 *   kubeconfig endpoint's CSRs with it), the apiserver's serving certificate, the
 *   service-account signing key pair, and the controller manager's client credential;
 * - `admin`: what the syncer and the access proxy reach the instance with: a kubeconfig with the
 *   CA and a client certificate of the instance's CA in `system:masters` (inline only, as
 *   clusters/connection.ts requires), and the CA alone.
 *
 * A client certificate, not a static token file: it needs no file beside the certificates (the
 * same `pki` Secret feeds both provisioners), it is checked by the apiserver's `--client-ca-file`
 * which the kubeconfig endpoint's CSR flow needs anyway, and no secret is ever on an apiserver's
 * command line or in a file a token could be read back from.
 *
 * `planInstancePki` decides (pure, the time is an argument) what to keep and what to make;
 * `buildInstancePki` makes it. What is kept is kept byte for byte, so a second run over its own
 * output changes nothing.
 */

/** Plain-text Secret data (what `stringData` takes; `data` is its base64). */
export type SecretText = Record<string, string>;

const DAY = 24 * 3600;
export const CA_VALIDITY_SECONDS = 10 * 365 * DAY;
const LEAF_VALIDITY_SECONDS = 365 * DAY;
/** Made again when less than this is left: never a certificate that expires within a day. */
export const RENEW_BEFORE: RenewBefore = { seconds: 30 * DAY };

/** The admin's Kubernetes user name (its group is system:masters). */
export const ADMIN_USER = 'platform:virtual-cluster-admin';
/** The controller manager's user name (its group is system:masters, as in `platform dev`). */
const CONTROLLER_MANAGER_USER = 'system:kube-controller-manager';
const MASTERS = 'system:masters';

export interface InstancePkiInput {
  readonly namespace: string;
  readonly name: string;
  /** Where the syncer and the proxy dial the apiserver (the admin kubeconfig's server). */
  readonly endpoint: string;
  /** The apiserver's port on loopback, which the controller manager dials. */
  readonly apiServerPort: number;
}

export type Action = 'keep' | 'make';

export interface PkiPlan {
  readonly ca: Action;
  readonly serviceAccountKeys: Action;
  readonly serving: Action;
  readonly admin: Action;
  readonly controllerManager: Action;
  /** Why anything is made, in words (no key material): for logs and Events. */
  readonly reasons: readonly string[];
}

interface Existing {
  readonly pki: SecretText | undefined;
  readonly admin: SecretText | undefined;
}

/** The CA when its certificate parses and matches its key, else why not (a phrase after "the CA"). */
function parsedCa(pki: SecretText | undefined): X509Certificate | string {
  const cert = certificateWithKey(
    pki && ownValue(pki, PKI_KEYS.caCert),
    pki && ownValue(pki, PKI_KEYS.caKey),
  );
  return typeof cert === 'string' ? (cert === 'is missing' ? cert : `certificate ${cert}`) : cert;
}

/** A client credential of the instance: the Secret and keys it is kept under, and whose it is. */
interface ClientCredential {
  readonly secret: keyof Existing;
  readonly certKey: string;
  readonly keyKey: string;
  readonly user: string;
}

/** The admin's (syncer, access proxy) and the controller manager's: both in system:masters. */
const CLIENTS = {
  admin: { secret: 'admin', certKey: ADMIN_KEYS.clientCert, keyKey: ADMIN_KEYS.clientKey, user: ADMIN_USER },
  controllerManager: {
    secret: 'pki',
    certKey: PKI_KEYS.controllerManagerCert,
    keyKey: PKI_KEYS.controllerManagerKey,
    user: CONTROLLER_MANAGER_USER,
  },
} as const satisfies Record<string, ClientCredential>;

/** The certificate and key of `client` in `existing`, where both are there. */
function existingClient(existing: Existing, client: ClientCredential): CertificateAndKey | undefined {
  const data = existing[client.secret] ?? {};
  const [certPem, keyPem] = [ownValue(data, client.certKey), ownValue(data, client.keyKey)];
  return certPem !== undefined && keyPem !== undefined ? { certPem, keyPem } : undefined;
}

/** Why a client certificate must be made again (a phrase after "the ... certificate"), or undefined. */
function clientProblem(
  existing: Existing,
  client: ClientCredential,
  ca: X509Certificate,
  now: number,
): string | undefined {
  const data = existing[client.secret] ?? {};
  const [certPem, keyPem] = [ownValue(data, client.certKey), ownValue(data, client.keyKey)];
  const none = { dnsNames: [], ipAddresses: [] };
  const problem = servingProblem({ certPem, keyPem }, ca, now, { renewBefore: RENEW_BEFORE, names: none });
  if (problem) return problem;
  const subject = new X509Certificate(certPem ?? '').subject.split('\n');
  return subject.includes(`CN=${client.user}`) && subject.includes(`O=${MASTERS}`)
    ? undefined
    : `does not name ${client.user} in ${MASTERS}`;
}

/** What to keep and what to make of an instance's PKI at `now`. Pure. */
export function planInstancePki(existing: Existing, instance: InstancePkiInput, now: number): PkiPlan {
  const reasons: string[] = [];
  const parsed = parsedCa(existing.pki);
  const caWhy = typeof parsed === 'string' ? parsed : caProblem(parsed, now, RENEW_BEFORE);
  const ca = caWhy || typeof parsed === 'string' ? undefined : parsed;
  if (caWhy) reasons.push(`the CA ${caWhy}`);
  const pki = existing.pki ?? {};
  const leaf = (what: string, problem: () => string | undefined): Action => {
    const why = ca ? problem() : 'is from a CA that is made again';
    if (why) reasons.push(`the ${what} ${why}`);
    return why ? 'make' : 'keep';
  };
  const plan: Omit<PkiPlan, 'reasons'> = {
    ca: ca ? 'keep' : 'make',
    serviceAccountKeys:
      ownValue(pki, PKI_KEYS.serviceAccountPublicKey) && ownValue(pki, PKI_KEYS.serviceAccountPrivateKey)
        ? 'keep'
        : 'make',
    serving: leaf('serving certificate', () =>
      servingProblem(
        { certPem: ownValue(pki, PKI_KEYS.servingCert), keyPem: ownValue(pki, PKI_KEYS.servingKey) },
        ca!,
        now,
        {
          renewBefore: RENEW_BEFORE,
          names: servingNamesOf(instance),
        },
      ),
    ),
    admin: leaf('admin certificate', () => clientProblem(existing, CLIENTS.admin, ca!, now)),
    controllerManager: leaf('controller manager certificate', () =>
      clientProblem(existing, CLIENTS.controllerManager, ca!, now),
    ),
  };
  if (plan.serviceAccountKeys === 'make') reasons.push('the service-account keys are missing');
  return { ...plan, reasons };
}

/** A kubeconfig with inline credentials only (what clusters/connection.ts accepts). Pure. */
function clientKubeconfig(
  name: string,
  server: string,
  caPem: string,
  client: CertificateAndKey,
  user: string,
): string {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  return toYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': b64(caPem) } }],
    users: [
      {
        name: user,
        user: { 'client-certificate-data': b64(client.certPem), 'client-key-data': b64(client.keyPem) },
      },
    ],
    contexts: [{ name, context: { cluster: name, user } }],
    'current-context': name,
  });
}

const clientRequest = (user: string) => ({
  commonName: user,
  organizations: [MASTERS],
  usage: 'client' as const,
  validForSeconds: LEAF_VALIDITY_SECONDS,
});

/**
 * The data of the `pki` and `admin` Secrets: what `plan` keeps is copied from `existing`, the
 * rest is made. The kubeconfigs are rendered every time from the certificates and the current
 * endpoint and port (the endpoint may move; the text is the same when nothing did).
 */
export async function buildInstancePki(
  existing: Existing,
  plan: PkiPlan,
  instance: InstancePkiInput,
  now: Date = new Date(),
): Promise<{ pki: SecretText; admin: SecretText }> {
  const old = { pki: existing.pki ?? {}, admin: existing.admin ?? {} };
  const keep = (action: Action, certPem: string | undefined, keyPem: string | undefined) =>
    action === 'keep' && certPem !== undefined && keyPem !== undefined ? { certPem, keyPem } : undefined;
  const ca =
    keep(plan.ca, ownValue(old.pki, PKI_KEYS.caCert), ownValue(old.pki, PKI_KEYS.caKey)) ??
    (await createCertificateAuthority(`${instance.namespace}/${instance.name} CA`, CA_VALIDITY_SECONDS, now));
  const serving =
    keep(plan.serving, ownValue(old.pki, PKI_KEYS.servingCert), ownValue(old.pki, PKI_KEYS.servingKey)) ??
    (await issueCertificate(
      ca,
      {
        commonName: 'kube-apiserver',
        ...servingNamesOf(instance),
        usage: 'server',
        validForSeconds: LEAF_VALIDITY_SECONDS,
      },
      now,
    ));
  const client = async (action: Action, credential: ClientCredential) =>
    (action === 'keep' ? existingClient(existing, credential) : undefined) ??
    (await issueCertificate(ca, clientRequest(credential.user), now));
  const admin = await client(plan.admin, CLIENTS.admin);
  const controllerManager = await client(plan.controllerManager, CLIENTS.controllerManager);
  const oldPublic = ownValue(old.pki, PKI_KEYS.serviceAccountPublicKey);
  const oldPrivate = ownValue(old.pki, PKI_KEYS.serviceAccountPrivateKey);
  const serviceAccount =
    plan.serviceAccountKeys === 'keep' && oldPublic !== undefined && oldPrivate !== undefined
      ? { publicKeyPem: oldPublic, privateKeyPem: oldPrivate }
      : await createRsaKeyPair();
  const loopback = `https://127.0.0.1:${instance.apiServerPort}`;
  return {
    pki: {
      [PKI_KEYS.caCert]: ca.certPem,
      [PKI_KEYS.caKey]: ca.keyPem,
      [PKI_KEYS.servingCert]: serving.certPem,
      [PKI_KEYS.servingKey]: serving.keyPem,
      [PKI_KEYS.serviceAccountPublicKey]: serviceAccount.publicKeyPem,
      [PKI_KEYS.serviceAccountPrivateKey]: serviceAccount.privateKeyPem,
      [PKI_KEYS.controllerManagerCert]: controllerManager.certPem,
      [PKI_KEYS.controllerManagerKey]: controllerManager.keyPem,
      [PKI_KEYS.controllerManagerKubeconfig]: clientKubeconfig(
        instance.name,
        loopback,
        ca.certPem,
        controllerManager,
        CONTROLLER_MANAGER_USER,
      ),
    },
    admin: {
      [ADMIN_KEYS.kubeconfig]: clientKubeconfig(
        instance.name,
        instance.endpoint,
        ca.certPem,
        admin,
        ADMIN_USER,
      ),
      [ADMIN_KEYS.caCert]: ca.certPem,
      [ADMIN_KEYS.clientCert]: admin.certPem,
      [ADMIN_KEYS.clientKey]: admin.keyPem,
    },
  };
}

/** The instance's PKI at `now`: `existing` where it may stay, the rest made. */
export async function ensureInstancePki(
  existing: Existing,
  instance: InstancePkiInput,
  now: Date = new Date(),
): Promise<{ pki: SecretText; admin: SecretText; plan: PkiPlan }> {
  const plan = planInstancePki(existing, instance, now.getTime());
  return { ...(await buildInstancePki(existing, plan, instance, now)), plan };
}

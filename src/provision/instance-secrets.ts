import { GROUP_VERSION } from '../api/meta.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { controlPlaneLabelsOf } from './control-plane.ts';
import type { SecretText } from './pki.ts';
import type { ProvisionedInstance } from './provisioner.ts';

/**
 * The instance's Secrets on the host (in the instance's namespace), read and written as plain
 * text per key. Written only when their data differ, so an unchanged PKI is no write (and no new
 * resourceVersion for the syncer and the proxy to react to).
 */

interface SecretObject {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  data?: Record<string, string>;
}

const path = (namespace: string, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets${name ? `/${encodeURIComponent(name)}` : ''}`;

const decode = (data: Record<string, string> | undefined): SecretText =>
  Object.fromEntries(
    Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );
const encode = (text: SecretText): Record<string, string> =>
  Object.fromEntries(Object.entries(text).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]));

/** The Secret's data as text, or undefined when it does not exist. */
export async function readSecretText(
  api: KubeApi,
  namespace: string,
  name: string,
): Promise<SecretText | undefined> {
  try {
    const secret = await api.request<SecretObject>({ method: 'GET', path: path(namespace, name) });
    return decode(secret.data);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

function sameText(a: SecretText, b: SecretText): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/**
 * Creates the Secret or replaces its data when it differs. Owned by the VirtualClusterInstance
 * when its uid is known, so the host's garbage collector removes it with the instance even if
 * the provisioner never runs `remove`.
 */
export async function writeSecretText(
  api: KubeApi,
  instance: ProvisionedInstance,
  name: string,
  text: SecretText,
): Promise<void> {
  const { namespace } = instance;
  const current = await api
    .request<SecretObject>({ method: 'GET', path: path(namespace, name) })
    .catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
  if (current && sameText(decode(current.data), text)) return;
  const metadata = {
    name,
    namespace,
    labels: controlPlaneLabelsOf(instance.name),
    ...(instance.uid
      ? {
          ownerReferences: [
            {
              apiVersion: GROUP_VERSION,
              kind: 'VirtualClusterInstance',
              name: instance.name,
              uid: instance.uid,
            },
          ],
        }
      : {}),
  };
  const body = { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', data: encode(text) };
  if (!current) {
    await api.request({ method: 'POST', path: path(namespace), body: { ...body, metadata } });
    return;
  }
  await api.request({
    method: 'PUT',
    path: path(namespace, name),
    body: { ...body, metadata: { ...metadata, resourceVersion: current.metadata.resourceVersion } },
  });
}

/** Deletes the Secret; one that does not exist is fine. */
export async function deleteSecret(api: KubeApi, namespace: string, name: string): Promise<void> {
  try {
    await api.request({ method: 'DELETE', path: path(namespace, name) });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

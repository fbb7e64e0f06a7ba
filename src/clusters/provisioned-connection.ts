import { ADMIN_KEYS, secretNameOf } from '../provision/control-plane.ts';
import { type Connection, CredentialsMissing, connectionFromKubeconfig } from './connection.ts';

/**
 * How the platform reaches a virtual cluster it provisioned (a VirtualClusterInstance without
 * `spec.endpoint`): the inline kubeconfig the provisioner wrote into the instance's admin Secret
 * (`secretNameOf(name, 'admin')`, key `ADMIN_KEYS.kubeconfig`), read with the same checks and the
 * same error classes as a registered instance's credentials Secret (`connectionFor`): a missing
 * Secret or key is {@link CredentialsMissing}, anything but inline credentials is
 * `InvalidCredentials`. Used by the virtual cluster controller (the syncer, Ready) and the access
 * proxy.
 */

/** The name of the Secret in the instance's namespace that {@link provisionedConnection} reads. */
export function provisionedAdminSecretName(instanceName: string): string {
  return secretNameOf(instanceName, 'admin');
}

/**
 * The connection of provisioned instance `instanceName` from its admin Secret's `data` (base64
 * values), or null when the Secret does not exist (yet: the provisioner makes it).
 */
export function provisionedConnection(
  instanceName: string,
  adminSecretData: Record<string, string> | null,
): Connection {
  const secretName = provisionedAdminSecretName(instanceName);
  if (adminSecretData === null) throw new CredentialsMissing(`Secret ${secretName} does not exist`);
  const encoded = adminSecretData[ADMIN_KEYS.kubeconfig];
  const kubeconfig = encoded === undefined ? '' : Buffer.from(encoded, 'base64').toString('utf8');
  if (kubeconfig.trim() === '') {
    throw new CredentialsMissing(`Secret ${secretName} has no ${ADMIN_KEYS.kubeconfig} key`);
  }
  return connectionFromKubeconfig(kubeconfig);
}

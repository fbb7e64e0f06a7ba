import { badRequest, serviceUnavailable } from '../../api/status.ts';
import type { VirtualClusterInstance } from '../../api/virtualclusterinstance.ts';
import { readCredentialsSecret } from '../../clusters/access.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { provisionedAdminSecretName, provisionedConnection } from '../../clusters/provisioned-connection.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';

/**
 * How the kubeconfig endpoint's certificate mode reaches a virtual cluster to have a certificate
 * signed there: a registered instance with its `spec.credentialsSecretRef`, a provisioned one with
 * its admin Secret. The Secrets are read as the gateway and never quoted in an answer.
 */

/** The instance asked about. */
interface InstanceRequest {
  readonly namespace: string;
  readonly name: string;
}

/** How the platform reaches a registered instance: its `spec.credentialsSecretRef`. */
export async function registeredInstanceConnection(
  deps: { readonly api: KubeApi },
  request: InstanceRequest,
  instance: VirtualClusterInstance,
): Promise<Connection> {
  const { namespace, name } = request;
  const secretName = instance.spec.credentialsSecretRef?.name;
  if (!secretName) {
    throw badRequest(
      `virtual cluster ${namespace}/${name} has no spec.credentialsSecretRef, so the platform cannot have a client certificate signed there`,
    );
  }
  const secretData = await readInstanceSecret(deps, request, secretName);
  try {
    return connectionFor(instance.spec, secretName, secretData);
  } catch (err) {
    if (err instanceof CredentialsMissing || err instanceof InvalidCredentials)
      throw badRequest(
        `the credentials of virtual cluster ${namespace}/${name} cannot be used: ${err.message}`,
      );
    throw err;
  }
}

/**
 * How the platform reaches an instance it provisioned: its admin Secret. Until the provisioner
 * wrote it the instance is not made yet: 503, as the access proxy answers.
 */
export async function provisionedInstanceConnection(
  deps: { readonly api: KubeApi },
  request: InstanceRequest,
): Promise<Connection> {
  const { namespace, name } = request;
  const secretData = await readInstanceSecret(deps, request, provisionedAdminSecretName(name));
  if (secretData === null)
    throw serviceUnavailable(
      `virtual cluster ${namespace}/${name} is not provisioned yet: the platform has not made its control plane`,
    );
  try {
    return provisionedConnection(name, secretData);
  } catch (err) {
    if (err instanceof CredentialsMissing || err instanceof InvalidCredentials)
      throw serviceUnavailable(
        `the admin credentials of virtual cluster ${namespace}/${name} cannot be used: ${err.message}`,
      );
    throw err;
  }
}

/** A Secret of the instance's namespace as the gateway reads it (null: absent), never quoted. */
async function readInstanceSecret(
  deps: { readonly api: KubeApi },
  request: InstanceRequest,
  secretName: string,
): Promise<Record<string, string> | null> {
  try {
    return await readCredentialsSecret(deps.api, request.namespace, secretName);
  } catch {
    throw serviceUnavailable(
      `the credentials of virtual cluster ${request.namespace}/${request.name} could not be read`,
    );
  }
}

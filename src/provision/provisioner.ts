/**
 * What the VirtualClusterInstance controller asks of whichever provisioner the operator was
 * started with (processes in `platform dev`, in-cluster from the chart). Both run the control
 * plane `control-plane.ts` describes and keep the instance's Secrets (`pki`, `admin`) in its
 * namespace. Every method is idempotent and may be called again after a platform restart: the
 * provisioner's state is on disk or in the host cluster, never only in memory.
 */

/** The instance a control plane belongs to. */
export interface ProvisionedInstance {
  readonly namespace: string;
  readonly name: string;
  /** The VirtualClusterInstance's uid: the owner of the Secrets (and objects) made for it, when given. */
  readonly uid?: string;
}

export interface ProvisionOptions {
  /** Run a kube-controller-manager beside the apiserver (see `ControlPlaneInput.controllerManager`). */
  readonly controllerManager: boolean;
}

export type ProvisionPhase =
  /** Nothing of the instance exists (never made, or removed). */
  | 'Absent'
  /** Made and started; not every component is ready yet. */
  | 'Starting'
  /** Every component answers its readiness probe. */
  | 'Ready'
  /** Asleep: no component runs, the storage is kept. */
  | 'Stopped'
  /** A component cannot be started; `message` says which and why. */
  | 'Failed';

export interface ProvisionStatus {
  readonly phase: ProvisionPhase;
  /** Where the syncer and the access proxy reach the apiserver (`https://...`), once known. */
  readonly endpoint?: string;
  /** The Secret in the instance's namespace with `kubeconfig` and `ca.crt` (control-plane.ts ADMIN_KEYS). */
  readonly adminSecretName?: string;
  /** Base64 PEM of the instance's CA (what `spec.caData` would hold for a registered instance). */
  readonly caData?: string;
  /** Why it is not Ready, in words (never a credential). */
  readonly message?: string;
}

export interface Provisioner {
  /**
   * Makes what is missing (PKI Secrets, storage, control plane) and starts the control plane if
   * it is not running: creates, wakes from `stop`, and repairs. Returns once it is started, not
   * necessarily Ready (see `status`, or the provisioner's own wait).
   */
  ensure(instance: ProvisionedInstance, options: ProvisionOptions): Promise<ProvisionStatus>;
  /** Sleep: ends the control plane, keeps its storage and Secrets. Idempotent. */
  stop(instance: ProvisionedInstance): Promise<void>;
  /** Removes the control plane, its storage and its Secrets. Idempotent. */
  remove(instance: ProvisionedInstance): Promise<void>;
  /** What there is now, without changing it. */
  status(instance: ProvisionedInstance): Promise<ProvisionStatus>;
}

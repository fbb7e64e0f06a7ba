import { posix } from 'node:path';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../api/labels.ts';

/**
 * One description of a virtual cluster's control plane: which components run, each one's command
 * line for the multicall control-plane binary (hack/controlplane: `controlplane <component>
 * [flags]`) and which files it reads, each from which key of which Secret. Pure data from pure
 * input. Both provisioners run what it says and nothing else: the processes provisioner writes the
 * files and spawns the binary with each `argv`; the in-cluster provisioner mounts the Secrets at the
 * same paths and makes each component a container whose args are the same `argv`. A flag changed
 * here changes both.
 *
 * Every component talks to the others over loopback (one host in processes mode, one pod in
 * cluster mode), so etcd and the controller manager listen on 127.0.0.1 only; the apiserver binds
 * `bindAddress` (loopback for processes, all addresses in a pod so its Service reaches it).
 */

/** The components, in start order (each needs the one before it). */
export type ComponentName = 'etcd' | 'kube-apiserver' | 'kube-controller-manager';

/**
 * The labels the StatefulSet selects an instance's pod by, and its Service the endpoints by (an
 * orphaned claim is known as the instance's by them too).
 */
export function selectorLabelsOf(instanceName: string): Record<string, string> {
  return { 'app.kubernetes.io/name': 'virtual-control-plane', 'app.kubernetes.io/instance': instanceName };
}

/**
 * The labels of every object of an instance's control plane on the host, whichever provisioner
 * made it: its Secrets (both modes), and in a cluster its StatefulSet, pod, claim and Service.
 */
export function controlPlaneLabelsOf(instanceName: string): Record<string, string> {
  return {
    ...selectorLabelsOf(instanceName),
    'app.kubernetes.io/component': 'control-plane',
    [MANAGED_BY_LABEL]: MANAGED_BY,
  };
}

/** The Secrets of an instance, by role. */
export type SecretRole = 'pki' | 'admin';

/** The name of an instance's Secret of `role` in the instance's namespace. */
export function secretNameOf(instanceName: string, role: SecretRole): string {
  return `vc-${instanceName}-${role}`;
}

/**
 * The keys of the `pki` Secret (and the file names they are written to under `pkiDir`). Keys of
 * a Secret cannot hold `/`, so one key is one file of one directory.
 */
export const PKI_KEYS = {
  caCert: 'ca.crt',
  caKey: 'ca.key',
  servingCert: 'apiserver.crt',
  servingKey: 'apiserver.key',
  serviceAccountPublicKey: 'sa.pub',
  serviceAccountPrivateKey: 'sa.key',
  /** The controller manager's kubeconfig: its client certificate, inline, to the apiserver on loopback. */
  controllerManagerKubeconfig: 'controller-manager.kubeconfig',
  /** The controller manager's client certificate and key (the kubeconfig above holds them too). */
  controllerManagerCert: 'controller-manager.crt',
  controllerManagerKey: 'controller-manager.key',
} as const;
export type PkiKey = (typeof PKI_KEYS)[keyof typeof PKI_KEYS];

/** The keys of the `admin` Secret: what the syncer and the access proxy reach the instance with. */
export const ADMIN_KEYS = {
  /** Inline credentials only (client certificate in system:masters, CA), as `clusters/connection.ts` reads. */
  kubeconfig: 'kubeconfig',
  caCert: 'ca.crt',
  /** The admin's client certificate and key (the kubeconfig above holds them too). */
  clientCert: 'admin.crt',
  clientKey: 'admin.key',
} as const;

export interface ControlPlanePorts {
  /** The apiserver's secure port (on `bindAddress`). */
  readonly apiServer: number;
  /** etcd's client port (loopback). */
  readonly etcdClient: number;
  /** etcd's peer port (loopback; a single member, but etcd insists on listening). */
  readonly etcdPeer: number;
  /** The controller manager's secure (health) port (loopback). */
  readonly controllerManager: number;
}

/** The ports a pod uses: nothing else listens in it, so they are fixed. */
export const POD_PORTS: ControlPlanePorts = {
  apiServer: 6443,
  etcdClient: 2379,
  etcdPeer: 2380,
  controllerManager: 10257,
};

/** The in-cluster address range of the virtual cluster's Services; its first address is `kubernetes`'s. */
const SERVICE_CLUSTER_IP_RANGE = '10.0.0.0/16';
const KUBERNETES_SERVICE_IP = '10.0.0.1';

export interface ControlPlaneInput {
  /** The VirtualClusterInstance's namespace (on the host) and name. */
  readonly namespace: string;
  readonly name: string;
  readonly ports: ControlPlanePorts;
  /** Where the files of the `pki` Secret are (written or mounted); absolute. */
  readonly pkiDir: string;
  /** The instance's storage (etcd data and what the components write); absolute. */
  readonly dataDir: string;
  /** The apiserver's bind address: `127.0.0.1` for processes, `0.0.0.0` in a pod. */
  readonly bindAddress: string;
  /** The address the apiserver advertises (default: its bind address when that is not 0.0.0.0). */
  readonly advertiseAddress?: string;
  /**
   * Run a kube-controller-manager: garbage collection, namespace deletion, CSR signing (the
   * kubeconfig endpoint's client certificates), service accounts and their tokens, ClusterRole
   * aggregation. The syncer covers none of these; without it, deleting a namespace never finishes.
   */
  readonly controllerManager: boolean;
}

/** A file a component reads: written from `key` of the instance's Secret of role `secret`. */
export interface ComponentFile {
  readonly path: string;
  readonly secret: SecretRole;
  readonly key: PkiKey;
}

/** How to tell a component is ready: an unauthenticated GET (the component allows it anonymously). */
export interface ReadinessProbe {
  readonly scheme: 'HTTP' | 'HTTPS';
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly path: string;
}

export interface ComponentDescription {
  readonly name: ComponentName;
  /** The multicall binary's arguments: the component's name, then its flags. */
  readonly argv: readonly string[];
  readonly files: readonly ComponentFile[];
  /** Directories under `dataDir` it writes (created before it starts; kept across sleeps). */
  readonly dataDirs: readonly string[];
  readonly readiness: ReadinessProbe;
}

export interface ControlPlaneDescription {
  /** In start order; stopped in the reverse order. */
  readonly components: readonly ComponentDescription[];
  readonly secretNames: Readonly<Record<SecretRole, string>>;
}

/**
 * The controllers a control plane without nodes needs (the rest manage pods, nodes, volumes:
 * the host's business through the syncer).
 */
export const CONTROLLERS = [
  'garbage-collector-controller',
  'namespace-controller',
  'certificatesigningrequest-signing-controller',
  'certificatesigningrequest-cleaner-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'root-ca-certificate-publisher-controller',
  'clusterrole-aggregation-controller',
] as const;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function describeControlPlane(input: ControlPlaneInput): ControlPlaneDescription {
  for (const [what, value] of [
    ['namespace', input.namespace],
    ['name', input.name],
  ] as const) {
    if (!DNS_LABEL.test(value) || value.length > 63) {
      throw new Error(`the instance's ${what} ${JSON.stringify(value)} is not a DNS label`);
    }
  }
  for (const dir of [input.pkiDir, input.dataDir]) {
    if (!posix.isAbsolute(dir)) throw new Error(`${JSON.stringify(dir)} is not an absolute path`);
  }
  const components = [etcd(input), apiServer(input)];
  if (input.controllerManager) components.push(controllerManager(input));
  return {
    components,
    secretNames: { pki: secretNameOf(input.name, 'pki'), admin: secretNameOf(input.name, 'admin') },
  };
}

const pkiFile = (input: ControlPlaneInput, key: PkiKey): ComponentFile => ({
  path: posix.join(input.pkiDir, key),
  secret: 'pki',
  key,
});

export function etcdUrl(ports: ControlPlanePorts): string {
  return `http://127.0.0.1:${ports.etcdClient}`;
}

function etcd(input: ControlPlaneInput): ComponentDescription {
  const dataDir = posix.join(input.dataDir, 'etcd');
  return {
    name: 'etcd',
    argv: [
      'etcd',
      `--data-dir=${dataDir}`,
      `--listen-client-url=${etcdUrl(input.ports)}`,
      `--listen-peer-url=http://127.0.0.1:${input.ports.etcdPeer}`,
    ],
    files: [],
    dataDirs: [dataDir],
    readiness: { scheme: 'HTTP', host: '127.0.0.1', port: input.ports.etcdClient, path: '/health' },
  };
}

function apiServer(input: ControlPlaneInput): ComponentDescription {
  const file = (key: PkiKey) => pkiFile(input, key);
  const files = [
    file(PKI_KEYS.caCert),
    file(PKI_KEYS.servingCert),
    file(PKI_KEYS.servingKey),
    file(PKI_KEYS.serviceAccountPublicKey),
    file(PKI_KEYS.serviceAccountPrivateKey),
  ];
  const [caCert, servingCert, servingKey, saPublic, saPrivate] = files.map((f) => f.path);
  const advertise =
    input.advertiseAddress ?? (input.bindAddress === '0.0.0.0' ? undefined : input.bindAddress);
  const certDir = posix.join(input.dataDir, 'apiserver');
  return {
    name: 'kube-apiserver',
    argv: [
      'kube-apiserver',
      `--etcd-servers=${etcdUrl(input.ports)}`,
      // The instance has an etcd of its own: the default prefix, nothing shared to separate.
      '--etcd-prefix=/registry',
      `--bind-address=${input.bindAddress}`,
      ...(advertise ? [`--advertise-address=${advertise}`] : []),
      `--secure-port=${input.ports.apiServer}`,
      `--cert-dir=${certDir}`,
      `--tls-cert-file=${servingCert}`,
      `--tls-private-key-file=${servingKey}`,
      `--client-ca-file=${caCert}`,
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${saPublic}`,
      `--service-account-signing-key-file=${saPrivate}`,
      `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
      // The virtual cluster has no nodes and no network of its own: the apiserver must not
      // publish itself as the endpoints of `kubernetes` (a loopback address is not valid there).
      '--endpoint-reconciler-type=none',
      '--profiling=false',
    ],
    files,
    dataDirs: [certDir],
    readiness: { scheme: 'HTTPS', host: '127.0.0.1', port: input.ports.apiServer, path: '/readyz' },
  };
}

function controllerManager(input: ControlPlaneInput): ComponentDescription {
  const file = (key: PkiKey) => pkiFile(input, key);
  const files = [
    file(PKI_KEYS.controllerManagerKubeconfig),
    file(PKI_KEYS.caCert),
    file(PKI_KEYS.caKey),
    file(PKI_KEYS.serviceAccountPrivateKey),
  ];
  const [kubeconfig, caCert, caKey, saPrivate] = files.map((f) => f.path);
  const certDir = posix.join(input.dataDir, 'controller-manager');
  return {
    name: 'kube-controller-manager',
    argv: [
      'kube-controller-manager',
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${input.ports.controllerManager}`,
      `--cert-dir=${certDir}`,
      '--leader-elect=false',
      '--use-service-account-credentials=false',
      `--service-account-private-key-file=${saPrivate}`,
      `--root-ca-file=${caCert}`,
      `--cluster-signing-cert-file=${caCert}`,
      `--cluster-signing-key-file=${caKey}`,
      `--controllers=${CONTROLLERS.join(',')}`,
    ],
    files,
    dataDirs: [certDir],
    readiness: { scheme: 'HTTPS', host: '127.0.0.1', port: input.ports.controllerManager, path: '/healthz' },
  };
}

/**
 * The names the apiserver's serving certificate carries: what the syncer and the access proxy
 * dial (the Service's names in cluster mode, loopback in processes mode), what the components
 * dial among themselves (127.0.0.1), and the in-cluster `kubernetes` Service of the virtual
 * cluster itself (pods that reach their API through the syncer's rewrites).
 */
export function servingNamesOf(instance: { namespace: string; name: string }): {
  dnsNames: string[];
  ipAddresses: string[];
} {
  const service = `${instance.name}.${instance.namespace}.svc`;
  return {
    dnsNames: [
      'localhost',
      service,
      `${service}.cluster.local`,
      'kubernetes',
      'kubernetes.default',
      'kubernetes.default.svc',
      'kubernetes.default.svc.cluster.local',
    ],
    ipAddresses: ['127.0.0.1', KUBERNETES_SERVICE_IP],
  };
}

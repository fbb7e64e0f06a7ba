import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, inject } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { type Cluster, type ClusterOptions, ControlPlane } from '../../../src/dev/controlplane.ts';
import {
  type CertificateAndKey,
  createCertificateAuthority,
  issueCertificate,
} from '../../../src/pki/certificates.ts';

/**
 * A control plane of the calling describe block's own on the run's etcd, as `useExtraClusters`
 * starts, but keeping its CA: the reliability tests issue each operator a client certificate of
 * its own (so the apiserver, and its audit log, tell the processes apart) and run whole platforms
 * (webhooks, gateway, cluster-scoped controllers) that must not touch the shared host cluster.
 */
export interface Plane {
  /** A directory of this block's own (logs, kubeconfigs, audit logs), removed after it. */
  readonly dir: string;
  /** Starts a kube-apiserver (the plane starts with the first one). */
  startCluster(options: ClusterOptions): Promise<Cluster>;
  /** The plane, once a cluster was started. */
  plane(): ControlPlane;
}

export function usePlane(prefix: string): Plane {
  const dir = mkdtempSync(join(tmpdir(), `platform-${prefix}-`));
  let started: Promise<ControlPlane> | undefined;
  let resolved: ControlPlane | undefined;
  afterAll(async () => {
    if (started) await (await started).stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir,
    startCluster: async (options) => {
      started ??= ControlPlane.start({
        stateDir: join(dir, 'plane'),
        binary: inject('controlPlaneBinary'),
        etcdUrl: inject('etcdUrl'),
      });
      resolved = await started;
      return resolved.startCluster(options);
    },
    plane: () => {
      if (!resolved) throw new Error('no cluster was started on this plane yet');
      return resolved;
    },
  };
}

/** A client certificate of `plane`'s CA (which every apiserver of it trusts) in system:masters. */
export function operatorCertificate(plane: ControlPlane, user: string): Promise<CertificateAndKey> {
  return issueCertificate(plane.ca, {
    commonName: user,
    organizations: ['system:masters'],
    usage: 'client',
    validForSeconds: 3600,
  });
}

/** A CA and a serving certificate for 127.0.0.1 (the recording proxies). */
export async function loopbackServing(): Promise<{ caPem: string; serving: CertificateAndKey }> {
  const ca = await createCertificateAuthority('reliability-proxy-ca', 3600);
  const serving = await issueCertificate(ca, {
    commonName: 'reliability-proxy',
    ipAddresses: ['127.0.0.1'],
    dnsNames: ['localhost'],
    usage: 'server',
    validForSeconds: 3600,
  });
  return { caPem: ca.certPem, serving };
}

/** Writes a kubeconfig for `server` with a client certificate and returns its path. */
export function writeKubeconfig(
  path: string,
  name: string,
  server: string,
  caPem: string,
  client: CertificateAndKey,
): string {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  writeFileSync(
    path,
    toYaml({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name, cluster: { server, 'certificate-authority-data': b64(caPem) } }],
      users: [
        {
          name,
          user: { 'client-certificate-data': b64(client.certPem), 'client-key-data': b64(client.keyPem) },
        },
      ],
      contexts: [{ name, context: { cluster: name, user: name } }],
      'current-context': name,
    }),
    { mode: 0o600 },
  );
  return path;
}

export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
  stageTimestamp: string;
  stage: string;
}

/**
 * The kube-apiserver flags of an audit log of every write (metadata only) under `dir`, and a
 * reader of it: the apiserver's own record of who wrote what, when.
 */
export function auditLog(dir: string): { args: string[]; read(): AuditEvent[] } {
  mkdirSync(dir, { recursive: true });
  const policy = join(dir, 'audit-policy.yaml');
  const path = join(dir, 'audit.log');
  writeFileSync(
    policy,
    toYaml({
      apiVersion: 'audit.k8s.io/v1',
      kind: 'Policy',
      omitStages: ['RequestReceived'],
      rules: [
        { level: 'Metadata', verbs: ['create', 'update', 'patch', 'delete', 'deletecollection'] },
        { level: 'None' },
      ],
    }),
  );
  return {
    args: [`--audit-policy-file=${policy}`, `--audit-log-path=${path}`, '--audit-log-format=json'],
    read: () => {
      let text = '';
      try {
        text = readFileSync(path, 'utf8');
      } catch {
        return [];
      }
      return text
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as AuditEvent)
        .filter((event) => event.stage === 'ResponseComplete');
    },
  };
}

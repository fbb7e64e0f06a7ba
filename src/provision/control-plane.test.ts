import { describe, expect, it } from 'vitest';
import {
  type ControlPlaneInput,
  describeControlPlane,
  PKI_KEYS,
  POD_PORTS,
  secretNameOf,
  servingNamesOf,
} from './control-plane.ts';

const input: ControlPlaneInput = {
  namespace: 'p-team',
  name: 'dev',
  ports: { apiServer: 40001, etcdClient: 40002, etcdPeer: 40003, controllerManager: 40004 },
  pkiDir: '/state/vc/pki',
  dataDir: '/state/vc/data',
  bindAddress: '127.0.0.1',
  controllerManager: true,
};

const flag = (argv: readonly string[], name: string) =>
  argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

describe('describeControlPlane', () => {
  it('starts etcd, then the apiserver, then the controller manager, each by its multicall name', () => {
    const { components } = describeControlPlane(input);
    expect(components.map((c) => c.name)).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
    for (const c of components) expect(c.argv[0]).toBe(c.name);
  });

  it("syncs etcd's writes to disk: a virtual cluster's storage is not a throwaway store", () => {
    const [etcd] = describeControlPlane(input).components;
    expect(etcd!.argv.filter((a) => a.includes('fsync'))).toEqual([]);
  });

  it('leaves the controller manager out when not asked for', () => {
    const { components } = describeControlPlane({ ...input, controllerManager: false });
    expect(components.map((c) => c.name)).toEqual(['etcd', 'kube-apiserver']);
  });

  it('wires the apiserver to its own etcd and every file flag to a file of the pki Secret', () => {
    const [etcd, apiServer, controllerManager] = describeControlPlane(input).components;
    expect(flag(apiServer!.argv, 'etcd-servers')).toBe(flag(etcd!.argv, 'listen-client-url'));
    expect(flag(apiServer!.argv, 'etcd-servers')).toBe('http://127.0.0.1:40002');
    expect(flag(etcd!.argv, 'data-dir')).toBe('/state/vc/data/etcd');
    expect(flag(apiServer!.argv, 'secure-port')).toBe('40001');
    expect(flag(apiServer!.argv, 'tls-cert-file')).toBe(`/state/vc/pki/${PKI_KEYS.servingCert}`);
    expect(flag(controllerManager!.argv, 'cluster-signing-key-file')).toBe(`/state/vc/pki/${PKI_KEYS.caKey}`);
    // Every path flag of every component names a declared file or a directory under dataDir.
    for (const component of describeControlPlane(input).components) {
      const declared = new Set(component.files.map((f) => f.path));
      for (const file of component.files) {
        expect(file.path).toBe(`/state/vc/pki/${file.key}`);
        expect(file.secret).toBe('pki');
      }
      const paths = component.argv
        .filter((a) => /^--[a-z-]*(file|dir|kubeconfig)=/.test(a))
        .map((a) => a.split('=')[1] ?? '');
      expect(paths.length).toBeGreaterThan(0);
      for (const path of paths) {
        expect(declared.has(path) || component.dataDirs.some((d) => path === d), path).toBe(true);
      }
    }
  });

  it('binds the apiserver where it is told and advertises a bound address only', () => {
    const inPod = describeControlPlane({ ...input, bindAddress: '0.0.0.0', ports: POD_PORTS }).components[1]!;
    expect(flag(inPod.argv, 'bind-address')).toBe('0.0.0.0');
    expect(flag(inPod.argv, 'advertise-address')).toBeUndefined();
    expect(flag(inPod.argv, 'secure-port')).toBe('6443');
    const local = describeControlPlane(input).components[1]!;
    expect(flag(local.argv, 'advertise-address')).toBe('127.0.0.1');
  });

  it('names the Secrets after the instance', () => {
    expect(describeControlPlane(input).secretNames).toEqual({ pki: 'vc-dev-pki', admin: 'vc-dev-admin' });
    expect(secretNameOf('x', 'admin')).toBe('vc-x-admin');
  });

  it('refuses names that are not DNS labels and relative directories', () => {
    expect(() => describeControlPlane({ ...input, name: '../x' })).toThrow(/not a DNS label/);
    expect(() => describeControlPlane({ ...input, namespace: 'A' })).toThrow(/not a DNS label/);
    expect(() => describeControlPlane({ ...input, dataDir: 'data' })).toThrow(/absolute/);
  });
});

describe('servingNamesOf', () => {
  it('names the Service, loopback and the virtual cluster’s own kubernetes Service', () => {
    const names = servingNamesOf({ namespace: 'p-team', name: 'dev' });
    expect(names.dnsNames).toEqual(
      expect.arrayContaining(['localhost', 'dev.p-team.svc', 'dev.p-team.svc.cluster.local']),
    );
    expect(names.ipAddresses).toEqual(expect.arrayContaining(['127.0.0.1']));
  });
});

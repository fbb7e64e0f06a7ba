/**
 * Where the platform's image (the repository's Dockerfile) puts the multicall control-plane
 * binary hack/controlplane/build.sh builds: the in-cluster provisioner's containers run
 * `<CONTROL_PLANE_BINARY> etcd|kube-apiserver|...`. The image's entrypoint is `platform`, so the
 * pod spec names this binary as its command. in-cluster-image.test.ts reads the Dockerfile to
 * hold the two to one path.
 */
export const CONTROL_PLANE_BINARY = '/usr/local/bin/controlplane';

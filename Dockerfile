# syntax=docker/dockerfile:1
# The platform image: `platform operator` (and the other subcommands) on Node 24 LTS.
#
#   docker build -t ghcr.io/cluster-platform/platform:0.1.0 .
#
# The name and tag are what the Helm chart runs by default (charts/platform: image.repository,
# and the chart's appVersion, which is package.json's version).
ARG NODE_IMAGE=node:24-bookworm-slim
# Go of hack/controlplane/go.mod's `go` line, on the same Debian release as NODE_IMAGE: the
# control-plane binary links the C library it was built against, which the final image then has.
ARG GO_IMAGE=golang:1.26-bookworm

# The multicall control-plane binary (etcd, kube-apiserver, kube-controller-manager, kubectl) the
# in-cluster provisioner's StatefulSet runs (src/provision/in-cluster-image.ts: CONTROL_PLANE_BINARY). Built
# by the same hack/controlplane/build.sh as `make dev` and the tests, so flags and versions are one.
FROM ${GO_IMAGE} AS controlplane
WORKDIR /src
COPY hack/controlplane ./hack/controlplane
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    bin=$(hack/controlplane/build.sh) \
 && install -D -m 0755 "$bin" /out/controlplane

# Production dependencies only. isolated-vm (the syncer's patch sandbox) is a native addon: its
# package ships prebuilt binaries for Node 24; should none fit, node-gyp builds it here, so the
# compiler never reaches the final image.
FROM ${NODE_IMAGE} AS deps
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# node-gyp builds against the image's own Node headers instead of downloading them.
ENV npm_config_nodedir=/usr/local
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund \
 && node --no-node-snapshot -e "require('isolated-vm')" \
 && npm cache clean --force

# TypeScript to JavaScript (dist/). Install scripts are skipped: the compiler needs no native addon.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
# Owned by root, read-only for the process: the chart runs it with a read-only root filesystem.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin/platform.js ./bin/platform.js
COPY --from=controlplane /out/controlplane /usr/local/bin/controlplane
# The image's own unprivileged `node` user, by number so that runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8081 8443 9443
# Exec form: no shell at run time. --no-node-snapshot is required by isolated-vm.
ENTRYPOINT ["node", "--no-node-snapshot", "/app/bin/platform.js"]
CMD ["operator"]

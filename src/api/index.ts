// The API layer: one zod schema per kind of `management.platform/v1`, the registry, and the
// CRD and OpenAPI generators. Import from here, or from the kind's own module.
export * from './cluster.ts';
export * from './common.ts';
export * from './config.ts';
export * from './crd.ts';
export * from './directclusterendpointtoken.ts';
export * from './duration.ts';
export * from './identity.ts';
export * from './jsonschema.ts';
export * from './meta.ts';
export * from './openapi.ts';
export * from './ownedaccesskey.ts';
export * from './project.ts';
export * from './registry.ts';
export * from './scope.ts';
export * from './sharedsecret.ts';
export * from './virtualclusterinstance.ts';

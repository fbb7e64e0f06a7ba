import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AuthorizationV1Api } from '@kubernetes/client-node';
import { beforeAll, expect } from 'vitest';
import { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET } from '../../src/api/config.ts';
import { useGatewayEnv } from '../gateway/support.ts';
import { eventually } from '../support/wait.ts';
import { runDocExamples } from './runner.ts';
import { gatewayVars, useTempDir } from './support.ts';

/**
 * docs/audit.md against a kube-apiserver of its own with the webhooks, the SharedSecret
 * controller and an HTTPS gateway writing its audit log into a temporary `AUDIT_LOG_DIR`: the
 * page's configuration is posted through the gateway, the page's requests are made, and the lines
 * it shows are read from the file the gateway wrote (and rotated).
 */
const env = useGatewayEnv({ https: true });
const auditDir = useTempDir('doc-audit-log-');
const dir = useTempDir('doc-audit-');
let adminKey = '';
let aliceKey = '';

beforeAll(async () => {
  adminKey = await env().user('admin', { admin: true });
  aliceKey = await env().user('alice');
});

runDocExamples('audit.md', {
  env: () => ({
    ...gatewayVars(env(), dir),
    AUDIT_LOG_DIR: auditDir,
    PLATFORM_ADMIN_KEY: adminKey,
    PLATFORM_ACCESS_KEY: aliceKey,
  }),
  hooks: {
    'post-config': {
      after: async () => {
        // Stored where the operator reads it, and the gateway writes the log once it has seen it.
        const secret = await env().core.readNamespacedSecret({
          name: PLATFORM_CONFIG_SECRET,
          namespace: env().platformNamespace,
        });
        expect(Buffer.from(secret.data?.[PLATFORM_CONFIG_KEY] ?? '', 'base64').toString()).toContain(
          `path: ${auditDir}/audit.log`,
        );
        // The auditor applies the configuration from its informer, opening (creating) the log
        // file as it does: the requests after this are logged.
        await eventually(
          () => existsSync(join(auditDir, 'audit.log')),
          30_000,
          'the gateway to apply the audit configuration',
        );
      },
    },
    'post-invalid-config': {
      after: async () => {
        // The refused configuration changed nothing.
        const secret = await env().core.readNamespacedSecret({
          name: PLATFORM_CONFIG_SECRET,
          namespace: env().platformNamespace,
        });
        expect(Buffer.from(secret.data?.[PLATFORM_CONFIG_KEY] ?? '', 'base64').toString()).toContain(
          `path: ${auditDir}/audit.log`,
        );
      },
    },
    'alice-reads': {
      // Alice's read is made once the access rule is projected into RBAC (asked of the apiserver
      // directly, so that the wait leaves no lines in the audit log).
      before: () =>
        eventually(
          async () => {
            const review = await env()
              .kc.makeApiClient(AuthorizationV1Api)
              .createSubjectAccessReview({
                body: {
                  spec: {
                    user: 'alice',
                    groups: ['platform:authenticated', 'platform:user:alice'],
                    resourceAttributes: {
                      group: 'management.platform',
                      resource: 'sharedsecrets',
                      verb: 'get',
                      namespace: 'default',
                      name: 'db-password',
                    },
                  },
                },
              });
            return review.status?.allowed === true;
          },
          30_000,
          "alice's access to db-password",
        ),
    },
    'read-log': {
      after: () => {
        // Nothing secret in the whole file: no key, no secret value.
        const log = readFileSync(join(auditDir, 'audit.log'), 'utf8');
        for (const secret of [
          adminKey,
          aliceKey,
          adminKey.slice(21),
          aliceKey.slice(21),
          'aHVudGVyMg==',
          'hunter2',
        ])
          expect(log).not.toContain(secret);
      },
    },
  },
});

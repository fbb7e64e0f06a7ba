import { closeSync, openSync, readSync, statSync } from 'node:fs';
import * as https from 'node:https';
import type { Manifest } from '../support/helm.ts';

/** A JSON answer of the apiserver: code, headers and decoded body. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // biome-ignore lint/suspicious/noExplicitAny: apiserver answers are loosely typed
  body: any;
}

export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface CallOptions {
  body?: unknown;
  headers?: Record<string, string | string[]>;
  contentType?: string;
}

/**
 * Raw HTTPS to an apiserver as one bearer token, with the answer's headers (admission warnings)
 * and any extra request headers (impersonation). The typed clients hide both.
 */
export class Http {
  private readonly agent: https.Agent;

  constructor(
    private readonly server: string,
    caPem: string,
    private readonly token: string,
    /** Sent with every call (impersonation: acting as a tenant through the admin's credentials). */
    private readonly defaultHeaders: Record<string, string | string[]> = {},
  ) {
    this.agent = new https.Agent({ ca: caPem, keepAlive: true });
  }

  call(method: string, path: string, options: CallOptions = {}): Promise<HttpAnswer> {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        new URL(path, this.server),
        {
          method,
          agent: this.agent,
          headers: {
            authorization: `Bearer ${this.token}`,
            accept: 'application/json',
            ...(payload !== undefined ? { 'content-type': options.contentType ?? 'application/json' } : {}),
            ...this.defaultHeaders,
            ...options.headers,
          },
          timeout: 15_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: unknown = text;
            try {
              body = text === '' ? undefined : JSON.parse(text);
            } catch {
              // keep the text
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** The call's body; throws `HttpError` unless 2xx. */
  // biome-ignore lint/suspicious/noExplicitAny: as above
  async ok(method: string, path: string, options: CallOptions = {}): Promise<any> {
    const answer = await this.call(method, path, options);
    if (answer.status < 200 || answer.status >= 300) {
      const message = typeof answer.body === 'object' ? answer.body?.message : String(answer.body);
      throw new HttpError(answer.status, `${method} ${path}: ${answer.status} ${message ?? ''}`);
    }
    return answer.body;
  }

  /** The object, or null when it does not exist. */
  // biome-ignore lint/suspicious/noExplicitAny: as above
  async get(path: string): Promise<any | null> {
    const answer = await this.call('GET', path);
    if (answer.status === 404) return null;
    if (answer.status !== 200) throw new HttpError(answer.status, `GET ${path}: ${answer.status}`);
    return answer.body;
  }

  // biome-ignore lint/suspicious/noExplicitAny: as above
  async list(path: string, labelSelector?: string): Promise<any[]> {
    const query = labelSelector ? `?labelSelector=${encodeURIComponent(labelSelector)}` : '';
    return ((await this.ok('GET', `${path}${query}`)) as { items: unknown[] }).items as never[];
  }

  create(collection: string, body: unknown) {
    return this.ok('POST', collection, { body });
  }

  merge(path: string, body: unknown) {
    return this.ok('PATCH', path, { body, contentType: 'application/merge-patch+json' });
  }

  jsonPatch(path: string, operations: unknown[]) {
    return this.ok('PATCH', path, { body: operations, contentType: 'application/json-patch+json' });
  }

  /** Deletes; absent is fine. */
  async delete(path: string): Promise<void> {
    const answer = await this.call('DELETE', path);
    if (answer.status !== 404 && (answer.status < 200 || answer.status >= 300))
      throw new HttpError(answer.status, `DELETE ${path}: ${answer.status}`);
  }

  close(): void {
    this.agent.destroy();
  }
}

/** The fields of a kube-apiserver audit event (audit.k8s.io/v1, JSON lines) these tests read. */
export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: {
    resource?: string;
    subresource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
  };
  responseStatus?: { code?: number; message?: string };
}

export const describeEvent = (e: AuditEvent) => {
  const message = e.responseStatus?.message ?? '';
  const why = message.includes('attempting to grant RBAC permissions not currently held')
    ? 'escalation check'
    : /cannot set (an ownerRef|blockOwnerDeletion)/.test(message)
      ? `OwnerReferencesPermissionEnforcement: ${/cannot set (an ownerRef|blockOwnerDeletion)/.exec(message)?.[0]}`
      : (/cannot [a-z*]+ resource "[^"]+"/.exec(message)?.[0] ?? '');
  return `${e.verb} ${e.requestURI.split('?')[0]} -> ${e.responseStatus?.code ?? '?'}${why ? ` (${why})` : ''}`;
};

/**
 * The apiserver's audit log (`--audit-log-path`), read as it grows: the requests of the users
 * `watched` accepts (the components' ServiceAccounts, the syncers') and their answers. This is how
 * a test sees every request a component made that RBAC denied.
 */
export class AuditLog {
  private offset = 0;
  private partial = '';
  private readonly events: AuditEvent[] = [];

  constructor(
    private readonly path: string,
    private readonly watched: (username: string) => boolean,
  ) {}

  private poll(): void {
    let size: number;
    try {
      size = statSync(this.path).size;
    } catch {
      return;
    }
    if (size <= this.offset) return;
    const fd = openSync(this.path, 'r');
    try {
      const buffer = Buffer.alloc(size - this.offset);
      const read = readSync(fd, buffer, 0, buffer.length, this.offset);
      this.offset += read;
      const lines = (this.partial + buffer.subarray(0, read).toString('utf8')).split('\n');
      this.partial = lines.pop() ?? '';
      for (const line of lines) {
        if (line.trim() === '') continue;
        const event = JSON.parse(line) as AuditEvent;
        if (this.watched(event.user?.username ?? '')) this.events.push(event);
      }
    } finally {
      closeSync(fd);
    }
  }

  /** A position in the log: `denialsSince` counts from here. */
  mark(): number {
    this.poll();
    return this.events.length;
  }

  /**
   * The requests denied for lack of permission since `mark`, of the users `who` accepts (all
   * watched users when absent): 403s from RBAC and from the checks built on it, whose messages
   * say so (they name the user: authorization, escalation and bind checks, the create of a
   * server-side apply, impersonation; or the ownerReferences they guard:
   * OwnerReferencesPermissionEnforcement). Other 403s (a namespace being terminated) are not
   * about permissions.
   */
  denialsSince(mark: number, who: (username: string) => boolean = () => true): AuditEvent[] {
    this.poll();
    return this.events.slice(mark).filter((e) => {
      const message = (e.responseStatus?.message ?? '').toLowerCase();
      return (
        who(e.user.username) &&
        e.responseStatus?.code === 403 &&
        (message.includes(`user "${e.user.username}"`) ||
          /cannot set (an ownerref|blockownerdeletion)/.test(message))
      );
    });
  }

  /** Every request of the watched users since `mark`. */
  since(mark: number): AuditEvent[] {
    this.poll();
    return this.events.slice(mark);
  }
}

/** Only ServiceAccounts' requests (the components', the syncers'), at Metadata level (no bodies: secrets stay out of the log). */
export const auditPolicy = () =>
  JSON.stringify({
    apiVersion: 'audit.k8s.io/v1',
    kind: 'Policy',
    omitStages: ['RequestReceived'],
    rules: [{ level: 'Metadata', userGroups: ['system:serviceaccounts'] }, { level: 'None' }],
  });

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** One permission of a Role or ClusterRole: a verb on a resource (and one name, when the rule names some). */
export interface RuleEntry {
  role: Manifest;
  ruleIndex: number;
  apiGroup: string;
  resource: string;
  verb: string;
  resourceName?: string;
  /** `<owner>:group/resource:verb[name]`, the core group as `core`. */
  key: string;
}

/** Every (verb, resource, name) entry of the roles, in order; keys start with `owner:`. */
export function ruleEntries(owner: string, roles: Manifest[]): RuleEntry[] {
  const entries: RuleEntry[] = [];
  for (const role of roles) {
    (role.rules as PolicyRule[]).forEach((rule, ruleIndex) => {
      if (rule.apiGroups.length !== 1)
        throw new Error(`${role.metadata.name}: one API group per rule, please`);
      const apiGroup = rule.apiGroups[0]!;
      for (const resource of rule.resources)
        for (const verb of rule.verbs)
          for (const resourceName of rule.resourceNames?.length ? rule.resourceNames : [undefined]) {
            const key = `${owner}:${apiGroup || 'core'}/${resource}:${verb}${resourceName ? `[${resourceName}]` : ''}`;
            entries.push({
              role,
              ruleIndex,
              apiGroup,
              resource,
              verb,
              ...(resourceName ? { resourceName } : {}),
              key,
            });
          }
    });
  }
  return entries;
}

/** The role's rules without one entry (the rule is split so that all its other permissions stay). */
export function rulesWithout(rules: PolicyRule[], entry: RuleEntry): PolicyRule[] {
  return rules.flatMap((rule, index) => {
    if (index !== entry.ruleIndex) return [rule];
    const kept: PolicyRule[] = [];
    const otherResources = rule.resources.filter((r) => r !== entry.resource);
    if (otherResources.length > 0) kept.push({ ...rule, resources: otherResources });
    const otherVerbs = rule.verbs.filter((v) => v !== entry.verb);
    if (otherVerbs.length > 0) kept.push({ ...rule, resources: [entry.resource], verbs: otherVerbs });
    if (entry.resourceName) {
      const otherNames = (rule.resourceNames ?? []).filter((n) => n !== entry.resourceName);
      if (otherNames.length > 0)
        kept.push({ ...rule, resources: [entry.resource], verbs: [entry.verb], resourceNames: otherNames });
    }
    return kept;
  });
}

/** The SubjectAccessReview attributes of an entry (`resource/subresource` split at the first slash). */
export function accessAttributes(entry: RuleEntry, namespace: string) {
  const slash = entry.resource.indexOf('/');
  return {
    group: entry.apiGroup,
    resource: slash < 0 ? entry.resource : entry.resource.slice(0, slash),
    ...(slash < 0 ? {} : { subresource: entry.resource.slice(slash + 1) }),
    verb: entry.verb,
    namespace,
    ...(entry.resourceName ? { name: entry.resourceName } : {}),
  };
}

import type { AuditConfig, AuditPolicy } from '../../api/config-audit.ts';
import { formatMicroTime } from '../../runtime/clock.ts';
import { AuditFileBackend } from './backend.ts';
import {
  type AuditOutcome,
  type AuditRequestInfo,
  buildAuditEvent,
  capLevel,
  levelAtLeast,
  serializeAuditEvent,
} from './event.ts';
import {
  type AuditDecision,
  type AuditLevel,
  type AuditStage,
  auditLevelFor,
  effectiveAuditPolicy,
} from './policy.ts';

/**
 * Audit logging of gateway requests: follows `Config.status.audit` (re-read whenever the config
 * changes, no restart), judges each request by the policy ({@link auditLevelFor}), caps it by
 * the never-logged rules ({@link capLevel}) and writes one event per stage that the decision does
 * not omit. Failed authentications are always written, at `Metadata` at least.
 */

export interface AuditorOptions {
  readonly now?: () => number;
  readonly onError?: (error: Error) => void;
  /** Rotation size override in bytes (tests). */
  readonly maxSizeBytes?: number;
}

/** One request being audited. */
export interface AuditRecord {
  readonly level: AuditLevel;
  /** Writes the `ResponseStarted` event (long-running requests: watch). */
  responseStarted(outcome: AuditOutcome): void;
  /** Writes the `ResponseComplete` (or `Panic`) event; later calls do nothing. */
  complete(outcome: AuditOutcome, stage?: 'ResponseComplete' | 'Panic'): void;
}

export class Auditor {
  private backend: AuditFileBackend | undefined;
  private policy: AuditPolicy | undefined;
  private configKey = '';
  private readonly now: () => number;

  constructor(private readonly options: AuditorOptions = {}) {
    this.now = options.now ?? Date.now;
  }

  /** Applies an audit config (undefined or disabled stops logging). Cheap when nothing changed. */
  configure(audit: AuditConfig | undefined): void {
    const key = JSON.stringify(audit?.enabled === true ? audit : null);
    if (key === this.configKey) return;
    this.configKey = key;
    const previous = this.backend;
    this.backend = undefined;
    this.policy = undefined;
    void previous?.close();
    if (audit?.enabled !== true || !audit.path) return;
    try {
      this.policy = effectiveAuditPolicy(audit);
      this.backend = new AuditFileBackend({
        path: audit.path,
        maxSizeMB: audit.maxSize,
        ...(this.options.maxSizeBytes ? { maxSizeBytes: this.options.maxSizeBytes } : {}),
        ...(audit.maxBackups !== undefined ? { maxBackups: audit.maxBackups } : {}),
        ...(audit.maxAge !== undefined ? { maxAgeDays: audit.maxAge } : {}),
        ...(audit.compress !== undefined ? { compress: audit.compress } : {}),
        now: this.now,
        ...(this.options.onError ? { onError: this.options.onError } : {}),
      });
    } catch (error) {
      this.policy = undefined;
      this.backend = undefined;
      this.options.onError?.(error as Error);
    }
  }

  get enabled(): boolean {
    return this.backend !== undefined;
  }

  /** The decision for a request (policy, then the never-logged cap). */
  decide(request: AuditRequestInfo, authenticated: boolean): AuditDecision {
    if (!this.policy) return { level: 'None', omitStages: [] };
    const decision = auditLevelFor(this.policy, {
      ...request.attributes,
      user: authenticated ? { name: request.user.username, groups: request.user.groups ?? [] } : undefined,
    });
    return { ...decision, level: capLevel(request.attributes, decision.level) };
  }

  /** Starts auditing a request: writes `RequestReceived` unless omitted; undefined when not logged. */
  begin(request: AuditRequestInfo, requestObject?: unknown): AuditRecord | undefined {
    const backend = this.backend;
    if (!backend) return undefined;
    const decision = this.decide(request, true);
    if (decision.level === 'None') return undefined;
    return this.record(backend, request, decision, requestObject);
  }

  /** Logs a refused authentication: its policy level, but `Metadata` at least. */
  failedAuthentication(request: AuditRequestInfo, outcome: AuditOutcome): void {
    const backend = this.backend;
    if (!backend) return;
    const decision = this.decide(request, false);
    const level = levelAtLeast(decision.level, 'Metadata') ? decision.level : 'Metadata';
    const event = buildAuditEvent(
      request,
      capLevel(request.attributes, level),
      'ResponseComplete',
      formatMicroTime(this.now()),
      {
        ...outcome,
        requestObject: undefined,
        responseObject: undefined,
      },
    );
    backend.write(serializeAuditEvent(event));
  }

  async close(): Promise<void> {
    const backend = this.backend;
    this.backend = undefined;
    this.configKey = '';
    await backend?.close();
  }

  private record(
    backend: AuditFileBackend,
    request: AuditRequestInfo,
    decision: AuditDecision,
    requestObject: unknown,
  ): AuditRecord {
    const omitted = (stage: AuditStage) => decision.omitStages.includes(stage);
    const write = (stage: AuditStage, outcome?: AuditOutcome) => {
      if (omitted(stage)) return;
      const event = buildAuditEvent(
        request,
        decision.level,
        stage,
        formatMicroTime(this.now()),
        outcome && {
          ...outcome,
          requestObject: outcome.requestObject ?? requestObject,
        },
      );
      backend.write(serializeAuditEvent(event));
    };
    write('RequestReceived', requestObject === undefined ? undefined : { code: 0, requestObject });
    let done = false;
    return {
      level: decision.level,
      responseStarted: (outcome) => write('ResponseStarted', outcome),
      complete: (outcome, stage = 'ResponseComplete') => {
        if (done) return;
        done = true;
        write(stage, outcome);
      },
    };
  }
}

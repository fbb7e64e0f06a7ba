import ivm from 'isolated-vm';
import { expressionFunctionSource } from './expression.ts';
import type { Json } from './merge-patch.ts';
import { type PreludeSettings, preludeSource } from './prelude.ts';

/**
 * One isolate per virtual cluster for patch expressions. Values go in and out only as copies
 * (structured clone in, a JSON string out); the isolate holds no host function or Reference.
 * Limits: heap (`memoryLimitMiB`), wall time per evaluation (`timeoutMs`), size of a result
 * (`maxOutputChars`) and CPU time per virtual cluster over a sliding window (`cpuBudget`).
 * An isolate that dies (out of memory) is rebuilt on the next evaluation.
 */

export interface SandboxOptions {
  settings: Omit<PreludeSettings, 'maxOutputChars'>;
  memoryLimitMiB?: number;
  timeoutMs?: number;
  maxOutputChars?: number;
  cpuBudget?: { budgetMs: number; windowMs: number };
  /** Milliseconds clock for the CPU budget window. */
  now?: () => number;
}

/** Every failure of an expression; `patch` names it (`sync.toHost.endpoints.patches[2]`). */
export class ExpressionFailure extends Error {
  constructor(
    readonly patch: string,
    message: string,
  ) {
    super(`${patch}: ${message}`);
  }
}
/** The expression threw, or does not compile. */
export class ExpressionError extends ExpressionFailure {
  override readonly name = 'ExpressionError';
}
export class ExpressionTimeout extends ExpressionFailure {
  override readonly name = 'ExpressionTimeout';
}
export class ExpressionMemoryLimit extends ExpressionFailure {
  override readonly name = 'ExpressionMemoryLimit';
}
export class ExpressionOutputTooLarge extends ExpressionFailure {
  override readonly name = 'ExpressionOutputTooLarge';
}
/** The virtual cluster used up its CPU budget for the current window; nothing was run. */
export class ExpressionCpuBudgetExceeded extends ExpressionFailure {
  override readonly name = 'ExpressionCpuBudgetExceeded';
}
export class SandboxDisposed extends ExpressionFailure {
  override readonly name = 'SandboxDisposed';
}

export interface EvaluationInput {
  value: Json;
  path: string;
  hostObject: Json | null;
  virtualObject: Json | null;
}

/** `{removed: true}` when the expression gave `null`, `undefined` or something JSON cannot hold. */
export type EvaluationResult = { removed: true } | { removed: false; value: Json };

interface Live {
  isolate: ivm.Isolate;
  context: ivm.Context;
  compiled: Map<string, ivm.Reference<(...args: unknown[]) => string | undefined>>;
}

export class Sandbox {
  readonly memoryLimitMiB: number;
  readonly timeoutMs: number;
  readonly maxOutputChars: number;
  private readonly cpuBudget: { budgetMs: number; windowMs: number };
  private readonly now: () => number;
  private readonly settings: PreludeSettings;
  private live: Live | null = null;
  private disposed = false;
  private cpuSamples: { at: number; ms: number }[] = [];
  /** How many isolates were built; more than one means one died and was replaced. */
  isolatesBuilt = 0;

  constructor(options: SandboxOptions) {
    this.memoryLimitMiB = options.memoryLimitMiB ?? 32;
    this.timeoutMs = options.timeoutMs ?? 50;
    this.maxOutputChars = options.maxOutputChars ?? 1024 * 1024;
    this.cpuBudget = options.cpuBudget ?? { budgetMs: 2000, windowMs: 10_000 };
    this.now = options.now ?? Date.now;
    this.settings = { ...options.settings, maxOutputChars: this.maxOutputChars };
  }

  /** CPU milliseconds spent in the current window. */
  cpuUsedMs(): number {
    const since = this.now() - this.cpuBudget.windowMs;
    this.cpuSamples = this.cpuSamples.filter((s) => s.at > since);
    return this.cpuSamples.reduce((sum, s) => sum + s.ms, 0);
  }

  async evaluate(patch: string, expression: string, input: EvaluationInput): Promise<EvaluationResult> {
    if (this.disposed) throw new SandboxDisposed(patch, 'sandbox is disposed');
    if (this.cpuUsedMs() >= this.cpuBudget.budgetMs) {
      throw new ExpressionCpuBudgetExceeded(
        patch,
        `CPU budget of ${this.cpuBudget.budgetMs}ms per ${this.cpuBudget.windowMs}ms used up`,
      );
    }
    const live = this.ensureLive();
    const fn = this.compile(live, patch, expression);
    const cpuBefore = live.isolate.cpuTime;
    let json: string | undefined;
    try {
      json = await fn.apply(undefined, [input.value, input.path, input.hostObject, input.virtualObject], {
        arguments: { copy: true },
        result: { copy: true },
        timeout: this.timeoutMs,
      });
    } catch (err) {
      throw this.classify(live, patch, err);
    } finally {
      if (!live.isolate.isDisposed) {
        this.cpuSamples.push({ at: this.now(), ms: Number(live.isolate.cpuTime - cpuBefore) / 1e6 });
      }
    }
    if (json === undefined) return { removed: true };
    const value = JSON.parse(json) as Json;
    return value === null ? { removed: true } : { removed: false, value };
  }

  /** Compiles (and caches) an expression without running it; throws {@link ExpressionError}. */
  prepare(patch: string, expression: string): void {
    if (this.disposed) throw new SandboxDisposed(patch, 'sandbox is disposed');
    this.compile(this.ensureLive(), patch, expression);
  }

  dispose(): void {
    this.disposed = true;
    this.release();
  }

  private release(): void {
    const live = this.live;
    this.live = null;
    if (live === null) return;
    for (const ref of live.compiled.values()) ref.release();
    live.context.release();
    if (!live.isolate.isDisposed) live.isolate.dispose();
  }

  private ensureLive(): Live {
    if (this.live !== null && !this.live.isolate.isDisposed) return this.live;
    this.release();
    const isolate = new ivm.Isolate({ memoryLimit: this.memoryLimitMiB });
    const context = isolate.createContextSync();
    isolate.compileScriptSync(preludeSource(this.settings)).runSync(context, { timeout: 5000 });
    this.isolatesBuilt++;
    this.live = { isolate, context, compiled: new Map() };
    return this.live;
  }

  private compile(live: Live, patch: string, expression: string) {
    const cached = live.compiled.get(expression);
    if (cached) return cached;
    let ref: ivm.Reference<(...args: unknown[]) => string | undefined>;
    try {
      const script = live.isolate.compileScriptSync(
        `__platformBind(${expressionFunctionSource(expression)})`,
      );
      ref = script.runSync(live.context, { reference: true, timeout: this.timeoutMs });
    } catch (err) {
      throw this.classify(live, patch, err);
    }
    live.compiled.set(expression, ref);
    return ref;
  }

  private classify(live: Live, patch: string, err: unknown): ExpressionFailure {
    const message = err instanceof Error ? err.message : String(err);
    if (live.isolate.isDisposed || /memory limit/i.test(message)) {
      this.release();
      return new ExpressionMemoryLimit(patch, `memory limit of ${this.memoryLimitMiB} MiB exceeded`);
    }
    if (/timed out/i.test(message)) {
      return new ExpressionTimeout(patch, `took longer than ${this.timeoutMs}ms`);
    }
    const tooLarge = /OUTPUT_TOO_LARGE:(\d+)/.exec(message);
    if (tooLarge) {
      return new ExpressionOutputTooLarge(
        patch,
        `result of ${tooLarge[1]} characters exceeds ${this.maxOutputChars}`,
      );
    }
    const kind = err instanceof Error && err.name !== 'Error' ? `${err.name}: ` : '';
    return new ExpressionError(patch, `${kind}${message}`);
  }
}

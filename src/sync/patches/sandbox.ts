import ivm from 'isolated-vm';
import { CpuWindow } from './cpu-window.ts';
import { expressionFunctionSource } from './expression.ts';
import {
  ExpressionCpuBudgetExceeded,
  ExpressionError,
  ExpressionFailure,
  ExpressionMemoryLimit,
  ExpressionOutputTooLarge,
  ExpressionTimeout,
  SandboxDisposed,
  SandboxMemoryBudgetExceeded,
} from './expression-failures.ts';
import { processSandboxMemoryBudget, type SandboxMemoryBudget } from './memory-budget.ts';
import type { Json } from './merge-patch.ts';
import { type PreludeSettings, preludeSource } from './prelude.ts';

/**
 * The sandbox patch expressions run in: one isolate per virtual cluster (built on first use),
 * holding one context whose realm the prelude froze and stripped of every channel an evaluation
 * could leave a value in for a later one (see prelude.ts and the channel tests). Nothing of the
 * host process is ever placed in the isolate: JSON text goes in, JSON text comes out.
 *
 * All evaluations of one object (every patch, every element a `*` matches) cross into the isolate
 * in ONE synchronous call (`evaluateAll`); each expression is compiled once per isolate.
 *
 * What each limit covers:
 * - `timeoutMs` (default 50 ms, wall clock): one evaluation, from the call of its expression
 *   until its result is serialized. An evaluation that returns later than that fails (measured
 *   inside the isolate); one that does not return is interrupted when the call's limit is reached.
 * - `objectTimeoutMs` (default 250 ms, wall clock): the call that carries one object's evaluations,
 *   `min(evaluations × timeoutMs, objectTimeoutMs)` but at least `timeoutMs`; isolated-vm
 *   interrupts it there. The evaluation in flight is named; if it had not yet run `timeoutMs`
 *   itself, the message says the object's patches took too long together. Promise jobs an
 *   evaluation queued run at the end of the call, inside this limit.
 * - `memoryLimitMiB` (default 32): the isolate's V8 heap, shared by the prelude, the compiled
 *   expressions and one call's evaluations at a time (values are not kept between calls). Past it
 *   V8 disposes the isolate; the evaluation in flight is named; the next call builds a new isolate.
 * - `maxOutputChars` (default 1 Mi): the JSON text of one evaluation's result.
 * - `cpuBudget` (default 2 s per 10 s): isolate CPU time of this sandbox over a sliding window;
 *   checked before each call, so one call can overrun it by at most its own limit.
 * - the process-wide memory budget (`memoryBudget`): see memory-budget.ts.
 * The time limits are wall clock (what isolated-vm offers), and on a busy machine any call can
 * stall: a call that reached one is made again, at most twice, before the timeout is reported
 * (an expression that is slow is slow every time; the CPU budget bounds what the retries cost).
 * After a call was interrupted (time or memory) its isolate is disposed, so nothing it left
 * behind (queued promise jobs) runs in a later call.
 *
 * The call is synchronous: while it runs, the syncer's event loop waits, at most the call's limit.
 */

export interface SandboxOptions {
  settings: Omit<PreludeSettings, 'maxOutputChars'>;
  memoryLimitMiB?: number;
  timeoutMs?: number;
  objectTimeoutMs?: number;
  maxOutputChars?: number;
  cpuBudget?: { budgetMs: number; windowMs: number };
  /** Shared by every sandbox of the process by default. */
  memoryBudget?: SandboxMemoryBudget;
  /** Milliseconds clock for the CPU budget window. */
  now?: () => number;
}

/** A time limit passed (see `evaluateAll`); internal. */
class TimedOut extends Error {
  constructor(readonly failure: ExpressionTimeout) {
    super(failure.message);
  }
}
const MAX_TIMEOUT_RETRIES = 2;

/** One evaluation of one expression on one matched value. */
export interface Evaluation {
  /** Names the expression in errors: `sync.toHost.services.patches[2].expression`. */
  patch: string;
  expression: string;
  value: Json;
  /** `context.path`: the concrete path that matched. */
  path: string;
}

/**
 * `context.hostObject` and `context.virtualObject` of a call, as JSON text (null for none):
 * serialized once per object, parsed inside the isolate only by evaluations that read them.
 */
export interface EvaluationObjects {
  hostJson: string | null;
  virtualJson: string | null;
}

/** `{removed: true}` when the expression gave `null`, `undefined` or something JSON cannot hold. */
export type EvaluationResult = { removed: true } | { removed: false; value: Json };

type Runner = ivm.Reference<
  (input: string, host: string | null, virtual: string | null, limit: number) => string
>;

interface Live {
  isolate: ivm.Isolate;
  context: ivm.Context;
  run: Runner;
  register: ivm.Reference<(fn: unknown) => number>;
  /** Expression text -> id of its compiled function in this isolate. */
  compiled: Map<string, number>;
  /** [evaluation in flight, its start (ms)], written by the isolate. */
  progress: Float64Array;
  /** MiB reserved from the memory budget for this isolate. */
  reservedMiB: number;
  /** The isolate's CPU time after its last call (nothing runs in it between calls). */
  cpuTime: bigint;
}

export class Sandbox {
  readonly memoryLimitMiB: number;
  readonly timeoutMs: number;
  readonly objectTimeoutMs: number;
  readonly maxOutputChars: number;
  private readonly cpuBudget: { budgetMs: number; windowMs: number };
  private readonly memoryBudget: SandboxMemoryBudget;
  private readonly settings: PreludeSettings;
  private live: Live | null = null;
  private disposed = false;
  private readonly cpuWindow: CpuWindow;
  /** How many isolates were built; more than one means one was disposed and replaced. */
  isolatesBuilt = 0;
  /** How many calls carried evaluations into an isolate (one per object, normally). */
  callsMade = 0;

  constructor(options: SandboxOptions) {
    this.memoryLimitMiB = options.memoryLimitMiB ?? 32;
    this.timeoutMs = options.timeoutMs ?? 50;
    this.objectTimeoutMs = Math.max(this.timeoutMs, options.objectTimeoutMs ?? 250);
    this.maxOutputChars = options.maxOutputChars ?? 1024 * 1024;
    this.cpuBudget = options.cpuBudget ?? { budgetMs: 2000, windowMs: 10_000 };
    this.memoryBudget = options.memoryBudget ?? processSandboxMemoryBudget;
    this.cpuWindow = new CpuWindow(this.cpuBudget.windowMs, options.now ?? Date.now);
    this.settings = { ...options.settings, maxOutputChars: this.maxOutputChars };
  }

  /** Records the call's CPU time (its wall time if V8 disposed the isolate). */
  private recordCpu(live: Live, startedAt: number): void {
    let ms: number;
    if (live.isolate.isDisposed) ms = Date.now() - startedAt;
    else {
      const cpuTime = live.isolate.cpuTime;
      ms = Number(cpuTime - live.cpuTime) / 1e6;
      live.cpuTime = cpuTime;
    }
    this.cpuWindow.record(ms);
  }

  /** One evaluation (a call of its own); see {@link evaluateAll}. */
  evaluate(
    patch: string,
    expression: string,
    input: { value: Json; path: string; hostObject: Json | null; virtualObject: Json | null },
  ): EvaluationResult {
    return this.evaluateAll([{ patch, expression, value: input.value, path: input.path }], {
      hostJson: input.hostObject === null ? null : JSON.stringify(input.hostObject),
      virtualJson: input.virtualObject === null ? null : JSON.stringify(input.virtualObject),
    })[0]!;
  }

  /**
   * Evaluates the expressions in one call into the isolate, in order; the results in the same
   * order. The first failing evaluation throws its {@link ExpressionFailure} (naming its patch)
   * and nothing else of the call is returned.
   */
  evaluateAll(evaluations: readonly Evaluation[], objects: EvaluationObjects): EvaluationResult[] {
    let timedOut: TimedOut | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        return this.call(evaluations, objects);
      } catch (err) {
        // A retry the CPU budget refuses reports the timeout that made it.
        if (timedOut && err instanceof ExpressionCpuBudgetExceeded) throw timedOut.failure;
        if (err instanceof TimedOut) timedOut = err;
        // A time limit passed. The limits are wall clock, and on a busy machine (or a starved
        // virtual machine, whose stolen time even counts as CPU time) any call can stall: tried
        // again, twice at most. An expression that is slow fails every time.
        if (err instanceof TimedOut && attempt <= MAX_TIMEOUT_RETRIES) continue;
        throw err instanceof TimedOut ? err.failure : err;
      }
    }
  }

  private call(evaluations: readonly Evaluation[], objects: EvaluationObjects): EvaluationResult[] {
    const first = evaluations[0];
    if (first === undefined) return [];
    if (this.disposed) throw new SandboxDisposed(first.patch, 'sandbox is disposed');
    if (this.cpuWindow.usedMs() >= this.cpuBudget.budgetMs) {
      throw new ExpressionCpuBudgetExceeded(
        first.patch,
        `CPU budget of ${this.cpuBudget.budgetMs}ms per ${this.cpuBudget.windowMs}ms used up`,
      );
    }
    const live = this.ensureLive(first.patch);
    const input = JSON.stringify(
      evaluations.map((e) => [this.compile(live, e.patch, e.expression), e.path, e.value]),
    );
    const callTimeout = Math.max(
      this.timeoutMs,
      Math.min(evaluations.length * this.timeoutMs, this.objectTimeoutMs),
    );
    const startedAt = Date.now();
    this.callsMade++;
    let output: string;
    try {
      output = live.run.applySync(undefined, [input, objects.hostJson, objects.virtualJson, this.timeoutMs], {
        timeout: callTimeout,
      });
    } catch (err) {
      this.recordCpu(live, startedAt);
      const failure = this.interrupted(live, evaluations, objects, err, callTimeout);
      throw failure instanceof ExpressionTimeout ? new TimedOut(failure) : failure;
    }
    this.recordCpu(live, startedAt);
    if (output.startsWith('!')) {
      const [index, kind, detail] = JSON.parse(output.slice(1)) as [number, string, string | number];
      const patch = evaluations[index]?.patch ?? first.patch;
      if (kind === 'timeout')
        throw new TimedOut(new ExpressionTimeout(patch, `took longer than ${this.timeoutMs}ms`));
      if (kind === 'tooLarge') {
        throw new ExpressionOutputTooLarge(
          patch,
          `result of ${detail} characters exceeds ${this.maxOutputChars}`,
        );
      }
      throw new ExpressionError(patch, String(detail));
    }
    const values = JSON.parse(output) as Json[];
    return values.map((value) => (value === null ? { removed: true } : { removed: false, value }));
  }

  /** Compiles (and caches) an expression without running it; throws {@link ExpressionError}. */
  prepare(patch: string, expression: string): void {
    if (this.disposed) throw new SandboxDisposed(patch, 'sandbox is disposed');
    this.compile(this.ensureLive(patch), patch, expression);
  }

  dispose(): void {
    this.disposed = true;
    this.release();
  }

  /** The failure for a call that isolated-vm cut short, naming the evaluation in flight. */
  private interrupted(
    live: Live,
    evaluations: readonly Evaluation[],
    objects: EvaluationObjects,
    err: unknown,
    callTimeout: number,
  ): ExpressionFailure {
    const message = err instanceof Error ? err.message : String(err);
    const index = live.progress[0]!;
    const ranMs = Date.now() - live.progress[1]!;
    const outOfMemory = live.isolate.isDisposed || /memory limit/i.test(message);
    const timedOut = /timed out/i.test(message);
    // Whatever the interrupted call left in the isolate (queued promise jobs) must not run later.
    this.release();
    const inFlight = evaluations[index];
    if (inFlight === undefined && evaluations.length > 1) {
      // Every evaluation had returned: a promise job one of them queued failed or ran out of time
      // or memory. One call per evaluation finds which.
      const alone = this.blameAlone(evaluations, objects);
      if (alone !== null) return alone;
    }
    const patch = (inFlight ?? evaluations.at(-1)!).patch;
    if (!outOfMemory && !timedOut) return new ExpressionError(patch, message);
    return this.failure(outOfMemory, patch, callTimeout, inFlight === undefined ? 0 : ranMs);
  }

  private failure(
    outOfMemory: boolean,
    patch: string,
    callTimeout: number,
    ranMs: number,
  ): ExpressionFailure {
    if (outOfMemory)
      return new ExpressionMemoryLimit(patch, `memory limit of ${this.memoryLimitMiB} MiB exceeded`);
    if (ranMs >= this.timeoutMs || callTimeout <= this.timeoutMs) {
      return new ExpressionTimeout(patch, `took longer than ${this.timeoutMs}ms`);
    }
    return new ExpressionTimeout(
      patch,
      `the patches of this object together took longer than ${callTimeout}ms`,
    );
  }

  /** Runs each evaluation in a call of its own; the first failure, if any. */
  private blameAlone(
    evaluations: readonly Evaluation[],
    objects: EvaluationObjects,
  ): ExpressionFailure | null {
    for (const evaluation of evaluations) {
      try {
        // One attempt each: the call being blamed is retried as a whole.
        this.call([evaluation], objects);
      } catch (err) {
        if (err instanceof TimedOut) return err.failure;
        if (err instanceof ExpressionFailure) return err;
        throw err;
      }
    }
    return null;
  }

  private release(): void {
    const live = this.live;
    this.live = null;
    if (live === null) return;
    live.run.release();
    live.register.release();
    live.context.release();
    if (!live.isolate.isDisposed) live.isolate.dispose();
    this.memoryBudget.release(live.reservedMiB);
  }

  private ensureLive(patch: string): Live {
    if (this.live !== null && !this.live.isolate.isDisposed) return this.live;
    this.release();
    const reservedMiB = this.memoryLimitMiB;
    if (!this.memoryBudget.tryReserve(reservedMiB)) {
      const { limitMiB } = this.memoryBudget;
      throw new SandboxMemoryBudgetExceeded(
        patch,
        reservedMiB > limitMiB
          ? `a sandbox of ${reservedMiB} MiB does not fit in this process's sandbox memory budget of ${limitMiB} MiB`
          : `the sandboxes of this process already hold ${this.memoryBudget.reservedMiB} MiB of their ${limitMiB} MiB memory budget; this virtual cluster's (${reservedMiB} MiB) is refused until others stop`,
      );
    }
    let isolate: ivm.Isolate | undefined;
    try {
      isolate = new ivm.Isolate({ memoryLimit: this.memoryLimitMiB });
      const context = isolate.createContextSync();
      const prelude = isolate
        .compileScriptSync(preludeSource(this.settings))
        .runSync(context, { reference: true, timeout: 5000 }) as ivm.Reference<(buffer: unknown) => unknown>;
      const progressBuffer = new SharedArrayBuffer(2 * Float64Array.BYTES_PER_ELEMENT);
      const runtime = prelude.applySync(
        undefined,
        [new ivm.ExternalCopy(progressBuffer).copyInto({ release: true })],
        { result: { reference: true }, timeout: 5000 },
      ) as unknown as ivm.Reference<{ run: unknown; register: unknown }>;
      prelude.release();
      const live: Live = {
        isolate,
        context,
        run: runtime.getSync('run', { reference: true }) as unknown as Runner,
        register: runtime.getSync('register', { reference: true }) as unknown as Live['register'],
        compiled: new Map(),
        progress: new Float64Array(progressBuffer),
        reservedMiB,
        cpuTime: 0n,
      };
      runtime.release();
      // A first, empty call compiles the runner, so that no object's call pays for it.
      live.run.applySync(undefined, ['[]', null, null, this.timeoutMs], { timeout: 5000 });
      live.cpuTime = isolate.cpuTime;
      this.isolatesBuilt++;
      this.live = live;
      return live;
    } catch (err) {
      if (isolate && !isolate.isDisposed) isolate.dispose();
      this.memoryBudget.release(reservedMiB);
      throw err;
    }
  }

  private compile(live: Live, patch: string, expression: string): number {
    const cached = live.compiled.get(expression);
    if (cached !== undefined) return cached;
    let id: number;
    try {
      const script = live.isolate.compileScriptSync(expressionFunctionSource(expression));
      const fn = script.runSync(live.context, { reference: true, timeout: this.timeoutMs }) as ivm.Reference;
      script.release();
      id = live.register.applySync(undefined, [fn.derefInto()], { timeout: this.timeoutMs });
      fn.release();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const kind = err instanceof Error && err.name !== 'Error' ? `${err.name}: ` : '';
      throw new ExpressionError(patch, `${kind}${message}`);
    }
    live.compiled.set(expression, id);
    return id;
  }
}

/**
 * How an expression of a patch fails in the sandbox (sandbox.ts says which limit each stands
 * for); the syncer reports them on the object and in its status (controllers/errors.ts).
 */

/** Every failure of an expression; `patch` names it (`sync.toHost.endpoints.patches[2].expression`). */
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
/** The process's sandboxes hold their whole memory budget; no isolate was built, nothing was run. */
export class SandboxMemoryBudgetExceeded extends ExpressionFailure {
  override readonly name = 'SandboxMemoryBudgetExceeded';
}
export class SandboxDisposed extends ExpressionFailure {
  override readonly name = 'SandboxDisposed';
}

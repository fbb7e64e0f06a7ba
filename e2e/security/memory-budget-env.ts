/**
 * Imported first by a test file, for its side effect only (before anything loads src/sync/patches/memory-budget.ts, which
 * reads it once, when the process's budget is made): the sandbox memory budget of the test's
 * process, where the components run, is 64 MiB, two sandboxes of 32 MiB. The name is
 * memory-budget.ts's MEMORY_BUDGET_ENV (importing it here would make the budget too early).
 */
process.env.PLATFORM_SANDBOX_MEMORY_BUDGET_MIB = '64';

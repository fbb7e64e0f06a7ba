import { runDocExamples } from './runner.ts';

/**
 * docs/sync-patches.md: every configuration and object of the page is written to a working
 * directory and every `platform sync preview` command runs as the real CLI
 * (`bin/platform.js`, the syncer's own translation, patches and sandbox); exit status and printed
 * output are compared with the page.
 */
runDocExamples('sync-patches.md', { env: () => ({}) });

import vm from 'node:vm';

/**
 * Whether a text is exactly one JavaScript expression, decided by V8's own parser without running
 * anything (`vm.Script` only compiles). Two compilations are needed because a text that closes the
 * wrapper's parenthesis can smuggle statements into a single wrapper:
 *  - `(\n<text>\n)` parses only if the text is one expression, OR the text closes the `(` early
 *    (`1); evil(); (1`);
 *  - `void\n<text>\n` has no bracket for the text to close, so an early `)` is a syntax error;
 *    it rejects the second case, while statements after an expression (`1; evil()`) are rejected
 *    by the first.
 * The newlines keep a trailing `//` comment from swallowing the closing parenthesis and stop a
 * leading `-->` from joining the wrapper. Finally the exact function the sandbox runs is compiled,
 * which adds strict-mode rules. Returns the syntax error message, or null when valid.
 */
export function singleExpressionError(text: string): string | null {
  if (text.trim() === '') return 'empty expression';
  const candidates = [`(\n${text}\n)`, `void\n${text}\n`, expressionFunctionSource(text)];
  for (const source of candidates) {
    try {
      new vm.Script(source, { filename: 'expression.js' });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return `not a single expression: ${message}`;
    }
  }
  return null;
}

/**
 * The function an expression becomes inside the sandbox. `this` is undefined (strict mode), the
 * arguments are the only way in; the helpers live on the frozen global of the isolate.
 */
export function expressionFunctionSource(text: string): string {
  return `(function (value, valueExists, context) {\n'use strict';\nreturn (\n${text}\n);\n})`;
}

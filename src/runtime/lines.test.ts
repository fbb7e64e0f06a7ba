import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { LineSplitter } from './lines.ts';

const split = (chunks: string[]) => {
  const lines: string[] = [];
  const splitter = new LineSplitter((line) => lines.push(line));
  for (const chunk of chunks) splitter.push(chunk);
  splitter.end();
  return lines;
};

describe('LineSplitter', () => {
  test('lines across chunk boundaries, a last line without a newline, empty lines kept', () => {
    expect(split(['{"a":', '1}\n{"b"', ':2}\n\n', 'tail'])).toEqual(['{"a":1}', '{"b":2}', '', 'tail']);
    expect(split(['one\n'])).toEqual(['one']);
    expect(split([])).toEqual([]);
  });

  test('however the text is cut into chunks, the lines are those of the whole text', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: fc.constantFrom('a', 'b', '\n', '{', '}') })), (chunks) => {
        const whole = chunks.join('');
        const expected = whole === '' ? [] : whole.split('\n');
        if (whole.endsWith('\n')) expected.pop();
        expect(split(chunks)).toEqual(expected);
      }),
    );
  });
});

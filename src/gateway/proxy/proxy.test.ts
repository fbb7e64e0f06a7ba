import { describe, expect, test } from 'vitest';
import { cappedWatchTimeout } from './proxy.ts';

describe('the watch timeout sent upstream', () => {
  test.each([
    [null, '60'],
    ['', '60'],
    ['0', '60'],
    ['30', '30'],
    ['3600', '60'],
    ['abc', 'abc'],
  ])('timeoutSeconds %s is sent as %s (at most 60)', (requested, sent) => {
    expect(cappedWatchTimeout(requested, 60)).toBe(sent);
  });
});

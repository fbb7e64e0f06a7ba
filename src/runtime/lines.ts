/**
 * Splits a stream of text chunks into lines (a watch's newline-delimited JSON, a child
 * process's output): `push` each chunk as it arrives, every complete line goes to `onLine`
 * without its newline (a trailing `\r` is kept); `end` delivers a last line without one.
 */
export class LineSplitter {
  private pending = '';

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: string): void {
    this.pending += chunk;
    let newline = this.pending.indexOf('\n');
    if (newline < 0) return;
    let start = 0;
    const text = this.pending;
    while (newline >= 0) {
      this.onLine(text.slice(start, newline));
      start = newline + 1;
      newline = text.indexOf('\n', start);
    }
    this.pending = text.slice(start);
  }

  /** Delivers what is left (a last line without a newline), if anything. */
  end(): void {
    const rest = this.pending;
    this.pending = '';
    if (rest !== '') this.onLine(rest);
  }
}

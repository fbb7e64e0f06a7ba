import { mkdirSync, readdirSync, statSync, unlinkSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import { createStream, type RotatingFileStream } from 'rotating-file-stream';

/**
 * The audit log file: JSON lines appended to `audit.path`, rotated by size with
 * rotating-file-stream (`maxSize` MB, default 100), keeping at most `maxBackups` rotated files
 * (all by default), removing rotated files older than `maxAge` days (none by default; checked
 * at open and after each rotation, by modification time) and gzipping them when `compress` is
 * set. Rotated files stay in the same directory, named like lumberjack's
 * `<name>-<UTC time>.<ext>[.gz]` (`audit-2026-01-02T03-04-05.678.log.gz`).
 */

export interface AuditFileOptions {
  readonly path: string;
  /** Megabytes before rotation. */
  readonly maxSizeMB?: number;
  /** Overrides `maxSizeMB` in bytes (tests). */
  readonly maxSizeBytes?: number;
  readonly maxBackups?: number;
  readonly maxAgeDays?: number;
  readonly compress?: boolean;
  /** For age checks; `Date.now` by default. */
  readonly now?: () => number;
  /** Told about write and rotation errors (never about content). */
  readonly onError?: (error: Error) => void;
}

const pad = (value: number, width = 2) => String(value).padStart(width, '0');

/** The name of a rotated file: `<stem>-YYYY-MM-DDTHH-mm-ss.SSS[-<index>]<ext>`. */
export function backupName(path: string, time: Date, index: number): string {
  const ext = extname(path);
  const stem = basename(path, ext);
  const stamp = `${time.getUTCFullYear()}-${pad(time.getUTCMonth() + 1)}-${pad(time.getUTCDate())}T${pad(
    time.getUTCHours(),
  )}-${pad(time.getUTCMinutes())}-${pad(time.getUTCSeconds())}.${pad(time.getUTCMilliseconds(), 3)}`;
  return `${stem}-${stamp}${index > 1 ? `-${index}` : ''}${ext}`;
}

/** Whether `file` (a name in the log's directory) is a rotated file of `path`. */
export function isBackupOf(path: string, file: string): boolean {
  const ext = extname(path);
  const stem = basename(path, ext);
  const quote = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(
    `^${quote(stem)}-\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}\\.\\d{3}(-\\d+)?${quote(ext)}(\\.gz)?$`,
  ).test(file);
}

export class AuditFileBackend {
  private readonly stream: RotatingFileStream;
  private closed = false;

  constructor(private readonly options: AuditFileOptions) {
    const directory = dirname(options.path);
    mkdirSync(directory, { recursive: true });
    const name = basename(options.path);
    const size = options.maxSizeBytes ?? (options.maxSizeMB ?? 100) * 1024 * 1024;
    this.stream = createStream(
      (time: number | Date | null, index?: number) =>
        // With a name generator, rotating-file-stream leaves the `.gz` extension to us.
        time === null
          ? name
          : `${backupName(options.path, new Date(time), index ?? 1)}${options.compress ? '.gz' : ''}`,
      {
        path: directory,
        size: `${Math.max(1, Math.floor(size))}B`,
        ...(options.compress ? { compress: 'gzip' } : {}),
        ...(options.maxBackups !== undefined && options.maxBackups > 0
          ? { maxFiles: options.maxBackups, history: `.${name}.history` }
          : {}),
        mode: 0o600,
      },
    );
    this.stream.on('error', (error: Error) => options.onError?.(error));
    this.stream.on('warning', (error: Error) => options.onError?.(error));
    this.stream.on('rotated', () => this.pruneByAge());
    this.pruneByAge();
  }

  /** Appends one line (it is never split across files). */
  write(line: string): void {
    if (this.closed) return;
    this.stream.write(line);
  }

  /** Flushes and closes the file. */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return new Promise((resolve) => {
      this.stream.end(() => resolve());
    });
  }

  /** Removes rotated files older than `maxAgeDays`. */
  pruneByAge(): void {
    const days = this.options.maxAgeDays;
    if (days === undefined || days <= 0) return;
    const directory = dirname(this.options.path);
    const cutoff = (this.options.now ?? Date.now)() - days * 24 * 3600 * 1000;
    let files: string[];
    try {
      files = readdirSync(directory);
    } catch {
      return;
    }
    for (const file of files) {
      if (!isBackupOf(this.options.path, file)) continue;
      const full = join(directory, file);
      try {
        if (statSync(full).mtimeMs < cutoff) unlinkSync(full);
      } catch (error) {
        this.options.onError?.(error as Error);
      }
    }
  }
}

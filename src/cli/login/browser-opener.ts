import { spawn } from 'node:child_process';

/** How to open a URL in the person's browser on this machine. */
export interface BrowserOpener {
  readonly command: string;
  readonly args: readonly string[];
  /** Windows: the arguments are already quoted for cmd.exe. */
  readonly windowsVerbatimArguments?: boolean;
}

/** cmd.exe's special characters, escaped for `start` (as `gh` does); `%` is left to the URL. */
const forCmd = (text: string) => text.replace(/[\^&|<>()]/g, '^$&');

/**
 * The command that opens `url` in a browser on this machine, or undefined when there is none that
 * would show it to the person at this terminal: `BROWSER` (a command, `%s` for the URL, else the
 * URL last), macOS `open` and Windows `start` unless the terminal is a remote shell (SSH), else
 * `xdg-open` where there is a display.
 */
export function browserOpener(
  url: string,
  platform: NodeJS.Platform = process.platform,
  env: NodeJS.ProcessEnv = process.env,
): BrowserOpener | undefined {
  const custom = (platform === 'win32' ? env.BROWSER : env.BROWSER?.split(':')[0])?.trim();
  if (custom) {
    const [command = '', ...args] = custom.split(/\s+/);
    const placeholder = args.some((arg) => arg.includes('%s'));
    return { command, args: placeholder ? args.map((arg) => arg.replaceAll('%s', url)) : [...args, url] };
  }
  const remote = Boolean(env.SSH_CONNECTION || env.SSH_TTY || env.SSH_CLIENT);
  switch (platform) {
    case 'darwin':
      return remote ? undefined : { command: 'open', args: [url] };
    case 'win32':
      return remote
        ? undefined
        : {
            command: env.ComSpec ?? 'cmd.exe',
            args: ['/d', '/c', 'start', '""', forCmd(url)],
            windowsVerbatimArguments: true,
          };
    default:
      return env.DISPLAY || env.WAYLAND_DISPLAY ? { command: 'xdg-open', args: [url] } : undefined;
  }
}

/**
 * Starts the opener; the promise settles only when it fails (it could not be started, or it exited
 * with an error, as `xdg-open` does when nothing can open URLs). Openers that stay with the
 * browser they started are not waited for.
 */
export function browserFailure(opener: BrowserOpener): Promise<void> {
  return new Promise((failed) => {
    const child = spawn(opener.command, [...opener.args], {
      stdio: 'ignore',
      detached: true,
      windowsVerbatimArguments: opener.windowsVerbatimArguments === true,
    });
    child.on('error', () => failed());
    child.on('exit', (code) => {
      if (code !== 0) failed();
    });
    child.unref();
  });
}

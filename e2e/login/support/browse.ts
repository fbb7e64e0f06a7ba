import { Agent, type Dispatcher, fetch as undiciFetch } from 'undici';

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
  ): Promise<{ status: number; location: string | undefined; text: string }> {
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
    for (const header of response.headers.getSetCookie()) {
      const [pair] = header.split(';');
      const eq = pair?.indexOf('=') ?? -1;
      if (pair && eq > 0) jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    this.cookies.set(target.origin, jar);
    const location = response.headers.get('location');
    return {
      status: response.status,
      location: location ? new URL(location, target).toString() : undefined,
      text: await response.text(),
    };
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

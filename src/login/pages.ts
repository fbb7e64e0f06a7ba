import type { LoginMethod } from './connectors.ts';

/**
 * The server-rendered pages of signing in: the login page (configured methods by their display
 * name, the password form where enabled, `uiSettings.legalTemplate`), the error page, the page
 * that shows a new key once, and the auto-submitting form that hands a key to `platform login`'s
 * loopback listener (POST, so the key never sits in a URL or the browser history). Everything
 * but the legal template (HTML the platform admin wrote) is escaped.
 */

export const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );

const page = (title: string, body: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}
a.method,button{display:block;width:100%;margin:.5rem 0;padding:.6rem;border:1px solid #888;border-radius:.3rem;background:#f4f4f4;text-align:center;text-decoration:none;color:#222;font-size:1rem}
input{display:block;width:100%;box-sizing:border-box;margin:.2rem 0 .8rem;padding:.5rem;font-size:1rem}
.error{color:#a00}.legal{margin-top:2rem;font-size:.85rem;color:#555}code{word-break:break-all}</style>
</head><body>${body}</body></html>`;

export interface LoginPageInput {
  readonly methods: readonly LoginMethod[];
  readonly passwordEnabled: boolean;
  readonly legalTemplate?: string | undefined;
  /** Query string to carry on every link and form (`platform login`'s key and return address). */
  readonly carry: string;
  /** The verification code of the `platform login` this sign-in is for, if any. */
  readonly verification?: string | undefined;
  readonly message?: string | undefined;
}

export function loginPage(input: LoginPageInput): string {
  const carry = input.carry ? `?${input.carry}` : '';
  const methods = input.methods
    .map(
      (method) =>
        `<a class="method" id="login-${escapeHtml(method.id)}" href="/auth/${encodeURIComponent(method.id)}/login${escapeHtml(carry)}">Sign in with ${escapeHtml(method.displayName)}</a>`,
    )
    .join('\n');
  const password = input.passwordEnabled
    ? `<form method="post" action="/auth/password/login${escapeHtml(carry)}" id="password-form">
<label>Username <input name="username" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit">Sign in</button></form>`
    : '';
  const none =
    !input.passwordEnabled && input.methods.length === 0 ? '<p>No sign-in method is configured.</p>' : '';
  return page(
    'Sign in',
    `<h1>Sign in to the platform</h1>
${input.verification ? `<p id="cli-for">For the <code>platform login</code> in your terminal showing <strong>${escapeHtml(input.verification)}</strong>.</p>` : ''}
${input.message ? `<p class="error" role="alert">${escapeHtml(input.message)}</p>` : ''}
${methods}
${password}${none}
${input.legalTemplate ? `<div class="legal">${input.legalTemplate}</div>` : ''}`,
  );
}

/** The cluster manager's sign-in: the person's own API key of the cluster manager, posted to the callback. */
export function accessKeyFormPage(method: Pick<LoginMethod, 'id' | 'displayName'>): string {
  return page(
    `Sign in with ${method.displayName}`,
    `<h1>Sign in with ${escapeHtml(method.displayName)}</h1>
<p>Create an API key under your account in ${escapeHtml(method.displayName)} (not scoped to a cluster) and paste it here. It is used once to find out who you are and is not stored.</p>
<form method="post" action="/auth/${encodeURIComponent(method.id)}/callback" id="access-key-form">
<label>API key <input name="key" type="password" autocomplete="off" required></label>
<button type="submit">Sign in</button></form>`,
  );
}

export function errorPage(message: string): string {
  return page(
    'Sign-in failed',
    `<h1>Sign-in failed</h1><p class="error" role="alert" id="error">${escapeHtml(message)}</p><p><a href="/auth/login">Back to sign-in</a></p>`,
  );
}

/** After signing out: on to `next` (the identity provider's end-session page, or the login page). */
export function signedOutPage(next: string): string {
  return page(
    'Signed out',
    `<h1>Signed out</h1><p>Your key is deleted.</p><p><a id="next" href="${escapeHtml(next)}">Continue</a></p>`,
  );
}

/** The key, shown once, with how to use it. */
export function keyPage(key: string, user: string, server: string): string {
  return page(
    'Signed in',
    `<h1>Signed in as ${escapeHtml(user)}</h1>
<p>Your access key (shown only now):</p><p><code id="access-key">${escapeHtml(key)}</code></p>
<p>Use it with kubectl:</p>
<pre>kubectl config set-credentials platform --token=&lt;the key&gt;
kubectl config set-cluster platform --server=${escapeHtml(server)}
kubectl config set-context platform --cluster=platform --user=platform</pre>
<p>Or run <code>platform login ${escapeHtml(server.replace(/\/kubernetes\/management$/, ''))}</code> next time.</p>`,
  );
}

/**
 * The code for a `platform login` waiting in a terminal elsewhere: it opens only there (see
 * `cli-handoff.ts`), and the page names the terminal's verification code.
 */
export function cliCodePage(code: string, user: string, verification: string): string {
  return page(
    'Signed in',
    `<h1>Signed in as ${escapeHtml(user)}</h1>
<p>Paste this code into the terminal where <code>platform login</code> is waiting and shows <strong id="cli-verification">${escapeHtml(verification)}</strong>. The code signs in as you: never give it to anyone else.</p>
<p><code id="cli-code">${escapeHtml(code)}</code></p>
<button type="button" id="copy" onclick="navigator.clipboard.writeText(document.getElementById('cli-code').textContent)">Copy the code</button>`,
  );
}

/** Hands the code to the loopback listener of `platform login` by an auto-submitted POST. */
export function handOffPage(returnTo: string, fields: Record<string, string>): string {
  const inputs = Object.entries(fields)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('');
  return page(
    'Signed in',
    `<h1>Signed in</h1><p>Returning to the command line…</p>
<form method="post" action="${escapeHtml(returnTo)}" id="handoff">${inputs}<noscript><button type="submit">Continue</button></noscript></form>
<script>document.getElementById('handoff').submit()</script>`,
  );
}

/**
 * Whether `text` is a return address `platform login` may use: plain HTTP on a loopback address
 * with an explicit port (RFC 8252 section 7.3), nothing else, so a sign-in can never hand a key to
 * another host.
 */
export function loopbackReturn(text: string | null | undefined): URL | undefined {
  if (!text || text.length > 512) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' || url.username || url.password || !url.port) return undefined;
  if (!['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname)) return undefined;
  return url;
}

// Shared plumbing of the browser tests: Debian chromium through playwright-core with a fresh
// profile per person, and a sign-in through the real provider's login form (fields `login`
// and `password`, any password).
import path from 'node:path';
import { chromium } from 'playwright-core';

export const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

// The value of env var `k`, or an error naming it and the test that sets it.
export const envOf = (script, runner) => (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${script}: ${k} is not set (run it through ${runner})`);
  return v;
};

// `browserFor(name)` launches a headless persistent context under `profiles`; `closeAll()`.
export function browsers(profiles) {
  const contexts = [];
  return {
    async browserFor(name) {
      const ctx = await chromium.launchPersistentContext(path.join(profiles, name), {
        executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
        headless: true,
        args: ARGS,
        viewport: { width: 1200, height: 900 },
      });
      contexts.push(ctx);
      return ctx;
    },
    async closeAll() { for (const c of contexts) await c.close(); },
  };
}

// Signs `user` in at `web` through the SSO button, landing on `next`; returns the page and the
// callback URL the provider sent the browser to (for replay tests). An anonymous visit of
// `next` must land on the sign-in page first.
export async function signIn(ctx, web, user, next) {
  const page = ctx.pages()[0] || await ctx.newPage();
  await page.goto(web + next);
  if (!/\/login\?next=/.test(page.url())) {
    throw new Error(`an anonymous visit of ${next} should land on the sign-in page, not ${page.url()}`);
  }
  await page.click('#sso');
  await page.waitForSelector('input[name=login]');
  await page.fill('input[name=login]', user);
  await page.fill('input[name=password]', 'any-password');
  const cb = page.waitForRequest((r) => r.url().startsWith(`${web}/oidc/callback`));
  await page.click('button[type=submit]');
  const callbackUrl = (await cb).url();
  await page.waitForURL((u) => u.toString().startsWith(web + next));
  return { page, callbackUrl };
}

// `signIn`, returning the page only.
export async function login(ctx, web, user, next) {
  return (await signIn(ctx, web, user, next)).page;
}

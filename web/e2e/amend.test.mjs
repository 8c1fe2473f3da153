// Approve with an edit in Chromium (issue #34, point 1), run by tests/e2e/amend.rs over real
// processes (api, policy, web): alice edits a refund of 120.00 to 80.00 on the decision page;
// her edit is a new proposal that needs a second person; bob approves it. At 1280×900 and
// 390×844 the diff and both buttons (Approve, Deny) are inside the first screen, without
// scrolling. Screenshots of each first screen go to ARTIFACTS.
//
// Env: WEB_URL, P_AMEND, ALICE_SESSION, BOB_SESSION (cookies `name=value` of dev-login
// sessions), ARTIFACTS.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { ARGS, envOf } from './chromium.mjs';

const env = envOf('amend.test.mjs', 'cargo test --test e2e -- amend::');
const WEB = env('WEB_URL');
const P = env('P_AMEND');
const ALICE = env('ALICE_SESSION');
const BOB = env('BOB_SESSION');
const ARTIFACTS = env('ARTIFACTS');
fs.mkdirSync(ARTIFACTS, { recursive: true });

const VIEWPORTS = [{ width: 1280, height: 900 }, { width: 390, height: 844 }];
const size = (vp) => `${vp.width}x${vp.height}`;

let browser;
after(async () => { await browser?.close(); });

// A page of a fresh context at `viewport`, signed in with the session cookie `cookie`.
async function pageAs(cookie, viewport) {
  browser ??= await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ARGS,
  });
  const ctx = await browser.newContext({ viewport });
  const eq = cookie.indexOf('=');
  await ctx.addCookies([{ name: cookie.slice(0, eq), value: cookie.slice(eq + 1), url: WEB }]);
  return ctx.newPage();
}

const shot = async (page, name) => {
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file });
  console.log(`screenshot: ${file}`);
};

// `selector` is shown and its whole box lies inside the viewport, at the top of the page.
async function inFirstScreen(page, selector, vp) {
  assert.equal(await page.evaluate(() => window.scrollY), 0, 'not scrolled');
  const box = await page.locator(selector).boundingBox();
  assert.ok(box, `${selector} is shown at ${size(vp)}`);
  const inside = box.x >= 0 && box.y >= 0 && box.x + box.width <= vp.width && box.y + box.height <= vp.height;
  assert.ok(inside, `${selector} ${JSON.stringify(box)} lies inside the first screen of ${size(vp)}`);
}

let amended;

test('alice edits 120.00 to 80.00 on the decision page: a new proposal, the diff on its card', async () => {
  const vp = VIEWPORTS[0];
  const page = await pageAs(ALICE, vp);
  await page.goto(`${WEB}/p/${P}`);
  assert.match(await page.textContent('#sentence'), /Refund 120\.00 USD/);
  await page.click('#amend summary');
  assert.equal(await page.inputValue('#edit-amount'), '120.00');
  await page.fill('#edit-amount', '80.00');
  await shot(page, `amend-01-edit-${size(vp)}`);
  await Promise.all([
    page.waitForURL((u) => /^\/p\/[0-9a-f-]{36}$/.test(u.pathname) && u.searchParams.get('result') === 'amended'),
    page.click('#amend-submit'),
  ]);
  amended = new URL(page.url()).pathname.split('/')[2];
  assert.notEqual(amended, P, 'the edit is a new proposal');
  assert.match(await page.textContent('#amended-from'), /Edited by approver:alice: amount 12000 → 8000/);
  assert.match(await page.textContent('#sentence'), /Refund 80\.00 USD/);
  // Two approvers are needed; alice's edit counted as hers, so she has nothing left to decide.
  assert.equal(await page.locator('#approve').count(), 0, 'alice cannot approve twice');
  await page.goto(`${WEB}/p/${P}`);
  assert.match(await page.textContent('#amended-to'), /Approved with an edit by approver:alice: amount 12000 → 8000 · this proposal will not run/);
  assert.equal(await page.getAttribute('#amended-to a', 'href'), `/p/${amended}`);
});

for (const vp of VIEWPORTS) {
  test(`bob's first screen of the amended proposal at ${size(vp)} holds the diff, Approve and Deny`, async () => {
    assert.ok(amended, 'the amendment was filed');
    const page = await pageAs(BOB, vp);
    await page.goto(`${WEB}/p/${amended}`);
    for (const sel of ['#amended-from .diff', '#approve', '#deny']) {
      await inFirstScreen(page, sel, vp);
    }
    await shot(page, `amend-02-first-screen-bob-${size(vp)}`);
  });
}

test('bob approves the amended proposal', async () => {
  const vp = VIEWPORTS[1];
  const page = await pageAs(BOB, vp);
  await page.goto(`${WEB}/p/${amended}`);
  await Promise.all([
    page.waitForURL((u) => u.searchParams.get('result') === 'approved'),
    page.click('#approve'),
  ]);
  assert.match(await page.textContent('.state-line'), /approved/);
  await shot(page, `amend-03-approved-${size(vp)}`);
  console.log(`amended: ${amended}`);
});

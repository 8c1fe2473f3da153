// Passkey-signed approvals in Chromium with its virtual authenticator (DevTools protocol
// WebAuthn.addVirtualAuthenticator through playwright-core), run by web/tests/web/passkey.rs
// (which seeds Postgres, starts the app at http://localhost:PORT — the RP ID is the host, and
// WebAuthn refuses IP addresses — and checks the database afterwards).
//
// The last tests combine passkeys with staged approvals: P_STAGED is a refund over 500.00
// whose stage 1 is team-leads (tina) and stage 2 finance (frank), each Approve passkey-signed.
//
// Env: WEB_URL, P_FIRST, P_SECOND, P_BOB, P_DENY, P_STAGED, ARTIFACTS, PROFILES.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { browsers, envOf, login as signIn } from './chromium.mjs';

const env = envOf('passkey.test.mjs', 'web/tests/web/passkey.rs');
const WEB = env('WEB_URL');
const P_FIRST = env('P_FIRST');
const P_SECOND = env('P_SECOND');
const P_BOB = env('P_BOB');
const P_DENY = env('P_DENY');
const P_STAGED = env('P_STAGED');
const ARTIFACTS = env('ARTIFACTS');
fs.mkdirSync(ARTIFACTS, { recursive: true });
const { browserFor, closeAll } = browsers(env('PROFILES'));
const shot = (page, name) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
const login = (ctx, user, next) => signIn(ctx, WEB, user, next);

// A platform authenticator with user verification, as a laptop's fingerprint reader (or, with
// transport 'usb', a security key with a PIN).
async function virtualAuthenticator(page, transport = 'internal', present = true) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2', transport, hasResidentKey: true,
      hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: present,
    },
  });
  return { cdp, authenticatorId };
}

// Clicks Register on /passkeys and waits until the passkey is registered. Registering needs
// a sign-in at the identity provider in the last five minutes: a session without one (this
// provider sends no auth_time unless asked) is first sent through the provider with
// max_age=300 and comes back to /passkeys, where the second click registers. Returns the
// /login/oidc URL of that detour, or null when there was none.
async function registerHere(page, label) {
  const first = page.waitForRequest((r) => r.url().startsWith(`${WEB}/login/oidc?`)
    || (r.url().split('?')[0] === `${WEB}/passkeys` && r.method() === 'POST'));
  const callback = page.waitForRequest((r) => r.url().startsWith(`${WEB}/oidc/callback`)).then(() => 'back', () => 'gone');
  await page.fill('input[name=label]', label);
  await page.click('#register');
  const req = await first;
  let detour = null;
  if (req.method() === 'GET') {
    detour = req.url();
    const form = page.waitForSelector('input[name=login]', { timeout: 20000 }).then(() => 'form', () => 'none');
    const how = await Promise.race([callback, form]);
    assert.equal(how, 'back', 'the provider asked for a password again: its session is older than max_age');
    await page.waitForURL((u) => u.toString().startsWith(`${WEB}/passkeys?`) && !u.toString().includes('registered'));
    await page.fill('input[name=label]', label);
    await page.click('#register');
  }
  await page.waitForURL((u) => u.toString().includes('/passkeys?registered=1'));
  return detour;
}

let alice; let aliceAuth;
before(async () => {
  alice = await login(await browserFor('alice'), 'alice', '/queue');
  aliceAuth = await virtualAuthenticator(alice);
});
after(closeAll);

test('no passkey: Approve is refused with a page that says how to register; Deny needs none', async () => {
  const bob = await login(await browserFor('bob'), 'bob', `/p/${P_BOB}`);
  assert.match(await bob.textContent('#passkey-note'), /signed with your passkey/);
  await bob.click('#approve');
  await bob.waitForSelector('#passkey-needed');
  assert.match(await bob.textContent('#passkey-needed'),
    /Approving this needs your passkey.*no passkey registered for acme.*Nothing was decided/s);
  assert.equal(await bob.getAttribute('#register-link', 'href'), `/passkeys?next=/p/${P_BOB}`);
  await shot(bob, 'p1-no-passkey-refused');
  await bob.goto(`${WEB}/p/${P_DENY}`);
  await bob.click('#deny');
  await bob.waitForURL(`${WEB}/p/${P_DENY}?result=denied`);
  await bob.goto(`${WEB}/p/${P_BOB}`);
  assert.ok(await bob.$('#approve'), 'the refused request is still undecided');
});

test('register a passkey, then approve with it', async () => {
  await alice.goto(`${WEB}/passkeys?next=/p/${P_FIRST}`);
  assert.ok(await alice.$('#no-passkeys'));
  const detour = await registerHere(alice, 'virtual key');
  if (detour) {
    const u = new URL(detour);
    assert.equal(u.searchParams.get('max_age'), '300', 'sent to the provider for a sign-in at most 5 minutes old');
    assert.equal(u.searchParams.get('next'), `/passkeys?next=${encodeURIComponent(`/p/${P_FIRST}`)}`);
  }
  assert.match(await alice.textContent('#passkeys'), /acme\s*virtual key\s*ES256/);
  const { credentials } = await aliceAuth.cdp.send('WebAuthn.getCredentials', { authenticatorId: aliceAuth.authenticatorId });
  assert.equal(credentials.length, 1, 'the authenticator holds one credential');
  await shot(alice, 'p2-registered');
  await alice.click('#back');
  await alice.waitForURL(`${WEB}/p/${P_FIRST}`);
  const sent = alice.waitForRequest((r) => r.url() === `${WEB}/p/${P_FIRST}/decide` && r.method() === 'POST');
  await alice.click('#approve');
  await alice.waitForURL(`${WEB}/p/${P_FIRST}?result=approved`);
  const body = new URLSearchParams((await sent).postData());
  assert.equal(body.get('passkey_nonce').length, 64, 'the assertion went with the form');
  fs.writeFileSync(path.join(ARTIFACTS, 'first-approval.form'), body.toString());
  assert.match(await alice.textContent('main'), /Approved\. A grant was issued/);
  assert.match(await alice.textContent('.young-passkey'), /^signed with a passkey registered <1 min before \(less than a day\)$/);
  await shot(alice, 'p3-approved-with-passkey');
});

// Posts a decide form from the page (same origin, the session's cookie and CSRF token).
async function postDecide(page, id, fields) {
  return page.evaluate(async ({ id, fields }) => {
    const res = await fetch(`/p/${id}/decide`, { method: 'POST', body: new URLSearchParams(fields), redirect: 'manual' });
    return { status: res.status, text: await res.text() };
  }, { id, fields });
}

test('the first proposal\'s assertion cannot approve the second one', async () => {
  const first = new URLSearchParams(fs.readFileSync(path.join(ARTIFACTS, 'first-approval.form'), 'utf8'));
  await alice.goto(`${WEB}/p/${P_SECOND}`);
  const fields = Object.fromEntries(first);
  fields.intent_hash = await alice.getAttribute('#approve-form input[name=intent_hash]', 'value');
  fields.doc_version = await alice.getAttribute('#approve-form input[name=doc_version]', 'value');
  fields.shown = await alice.getAttribute('#approve-form input[name=shown]', 'value');
  const r = await postDecide(alice, P_SECOND, fields);
  assert.equal(r.status, 409, r.text);
  assert.match(r.text, /passkey signature was refused: passkey_nonce: unknown or already used challenge/);
  await alice.goto(`${WEB}/p/${P_SECOND}`);
  assert.ok(await alice.$('#approve'), 'still undecided');
});

test('an assertion over another intent is refused, then the real one approves', async () => {
  await alice.goto(`${WEB}/p/${P_SECOND}`);
  const form = await alice.evaluate(() => Object.fromEntries(new FormData(document.getElementById('approve-form'))));
  // A fresh challenge for this proposal, but the authenticator signs one derived from another
  // intent hash (as a page showing a different request would ask for).
  const forged = await alice.evaluate(async ({ proposal, csrf }) => {
    const o = await (await fetch('/passkeys/challenge', { method: 'POST', body: new URLSearchParams({ csrf, purpose: 'approve', proposal }) })).json();
    const other = '0'.repeat(64);
    const jcs = JSON.stringify({ doc_version: 1, intent_hash: other, nonce: o.nonce, proposal_id: proposal, tenant_id: 'acme' });
    const msg = new Uint8Array([...new TextEncoder().encode('actiond/passkey-approval/v1\0'), ...new TextEncoder().encode(jcs)]);
    const challenge = await crypto.subtle.digest('SHA-256', msg);
    const b64u = (b) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    const unb64u = (s) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
    const cred = await navigator.credentials.get({ publicKey: {
      challenge, rpId: o.rp_id, userVerification: 'required',
      allowCredentials: o.allow.map((id) => ({ type: 'public-key', id: unb64u(id) })),
    } });
    return {
      passkey_nonce: o.nonce, passkey_credential_id: b64u(cred.rawId),
      passkey_authenticator_data: b64u(cred.response.authenticatorData),
      passkey_client_data_json: b64u(cred.response.clientDataJSON),
      passkey_signature: b64u(cred.response.signature),
    };
  }, { proposal: P_SECOND, csrf: form.csrf });
  const r = await postDecide(alice, P_SECOND, { ...form, ...forged });
  assert.equal(r.status, 409, r.text);
  assert.match(r.text, /client_data_json\.challenge: the passkey signed a different challenge/);
  await alice.goto(`${WEB}/p/${P_SECOND}`);
  await alice.click('#approve');
  await alice.waitForURL(`${WEB}/p/${P_SECOND}?result=approved`);
  await shot(alice, 'p4-second-approved');
});

// Signs `user` in, registers a passkey on a fresh virtual authenticator and comes back to
// the staged proposal's page.
async function withPasskey(user) {
  const page = await login(await browserFor(user), user, `/passkeys?next=/p/${P_STAGED}`);
  const auth = await virtualAuthenticator(page);
  await registerHere(page, `${user} key`);
  const { credentials } = await auth.cdp.send('WebAuthn.getCredentials', { authenticatorId: auth.authenticatorId });
  assert.equal(credentials.length, 1, `${user}'s authenticator holds one credential`);
  await page.click('#back');
  await page.waitForURL(`${WEB}/p/${P_STAGED}`);
  return page;
}

// Clicks Approve (the page's script has the authenticator sign first) and returns the form
// that was posted and the answer's status.
async function approveSigned(page) {
  const sent = page.waitForRequest((r) => r.url() === `${WEB}/p/${P_STAGED}/decide` && r.method() === 'POST');
  const answered = page.waitForResponse((r) => r.url() === `${WEB}/p/${P_STAGED}/decide` && r.request().method() === 'POST');
  await page.click('#approve');
  const body = new URLSearchParams((await sent).postData());
  assert.equal(body.get('passkey_nonce').length, 64, 'the assertion went with the form');
  assert.ok(body.get('passkey_signature'), 'signed');
  const status = (await answered).status();
  await page.waitForLoadState();
  return { body, status };
}

let frank; let frankStage1Form;
test('staged + passkey: finance approving during stage 1 is refused, even with a valid passkey signature', async () => {
  frank = await withPasskey('frank');
  assert.match(await frank.textContent('.stage'), /^stage 1 of 2: team-leads, 0 of 1 needed · next: finance$/);
  assert.match(await frank.textContent('.expires'), /^stage 1 ends in .* if nobody decides$/, 'one clock: the stage\'s');
  assert.match(await frank.textContent('#passkey-note'), /signed with your passkey/);
  const { body, status } = await approveSigned(frank);
  assert.equal(status, 409);
  assert.match(await frank.textContent('body'),
    /stage 1 of 2 waits for team-leads; you are not in team-leads, so your approval cannot count\. Nothing was decided/);
  frankStage1Form = Object.fromEntries(body);
  await shot(frank, 'p5-finance-refused-in-stage-1');
  await frank.goto(`${WEB}/p/${P_STAGED}`);
  assert.match(await frank.textContent('.stage'), /stage 1 of 2: team-leads, 0 of 1 needed/, 'nothing was decided');
});

test('staged + passkey: a team lead signs stage 1 with their own passkey', async () => {
  const tina = await withPasskey('tina');
  const { status } = await approveSigned(tina);
  assert.equal(status, 303);
  await tina.waitForURL(`${WEB}/p/${P_STAGED}?result=stage-complete`);
  assert.match(await tina.textContent('main'), /Your approval completed its stage; the next stage is open/);
  assert.match(await tina.textContent('.stage'), /stage 2 of 2: finance, 0 of 1 needed/);
  assert.equal(await tina.$('#approve'), null, 'tina cannot approve stage 2 as well');
  await shot(tina, 'p6-team-lead-signed-stage-1');
});

test('staged + passkey: finance cannot replay its stage-1 assertion in stage 2, then signs afresh', async () => {
  const r = await postDecide(frank, P_STAGED, frankStage1Form);
  // Status 0 is fetch's opaque redirect: the replay was decided (303), i.e. it approved.
  assert.notEqual(r.status, 0, 'the stage-1 assertion refused by the stage rule approved stage 2 when replayed');
  assert.equal(r.status, 409, r.text);
  assert.match(r.text, /passkey_nonce: unknown or already used challenge/);
  await frank.goto(`${WEB}/p/${P_STAGED}`);
  assert.match(await frank.textContent('.stage'), /stage 2 of 2: finance, 0 of 1 needed/);
  const { status } = await approveSigned(frank);
  assert.equal(status, 303);
  await frank.waitForURL(`${WEB}/p/${P_STAGED}?result=approved`);
  assert.match(await frank.textContent('main'), /Approved\. A grant was issued/);
  await shot(frank, 'p7-finance-signed-stage-2');
});

test('a second passkey for acme is registered only with an assertion by the first', async () => {
  await alice.goto(`${WEB}/passkeys`);
  // A security key, plugged in but not touched while the laptop's authenticator signs for the
  // new one; then the laptop's is left alone (it holds an excluded credential) and the key is
  // touched for the creation. The page's create() waits for that swap.
  const second = await virtualAuthenticator(alice, 'usb', false);
  const presence = (a, enabled) => a.cdp.send('WebAuthn.setAutomaticPresenceSimulation', { authenticatorId: a.authenticatorId, enabled });
  await alice.exposeFunction('swapAuthenticators', async () => {
    await presence(aliceAuth, false);
    await presence(second, true);
  });
  await alice.evaluate(() => {
    const create = navigator.credentials.create.bind(navigator.credentials);
    navigator.credentials.create = async (o) => { await window.swapAuthenticators(); return create(o); };
  });
  const got = alice.waitForRequest((r) => r.url() === `${WEB}/passkeys` && r.method() === 'POST');
  // The page's own error line, should a ceremony fail (rather than a 30 s timeout).
  const failed = alice.waitForFunction(() => document.getElementById('passkey-error')?.textContent, null, { timeout: 30000 })
    .then(() => alice.textContent('#passkey-error'), () => null);
  const said = await Promise.race([registerHere(alice, 'second key').then(() => null), failed]);
  assert.equal(said, null, 'the page reported a failed ceremony');
  const body = new URLSearchParams((await got).postData());
  const first = await aliceAuth.cdp.send('WebAuthn.getCredentials', { authenticatorId: aliceAuth.authenticatorId });
  const b64u = (s) => s.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  assert.equal(body.get('vouch_credential_id'), b64u(first.credentials[0].credentialId), 'the first passkey signed for the second');
  const { credentials } = await second.cdp.send('WebAuthn.getCredentials', { authenticatorId: second.authenticatorId });
  assert.equal(credentials.length, 1, 'the new authenticator holds the new credential');
  assert.equal(Buffer.from(credentials[0].userHandle, 'base64').length, 32, 'a random 32-byte user handle');
  assert.match(await alice.textContent('#passkeys'), /acme\s*second key\s*ES256[\s\S]*acme\s*virtual key\s*ES256/);
  await shot(alice, 'p8-second-passkey-vouched');
});

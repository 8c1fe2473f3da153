// Passkey ceremonies of the approval app (WebAuthn). Served from this origin; the pages allow
// scripts from 'self' only. Registration on /passkeys; on a decision page whose Approve needs a
// passkey, the Approve button asks the server for a single-use challenge derived from the
// request's intent, has the authenticator sign it, and submits the assertion with the form.
'use strict';
(() => {
  const b64u = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf)))
    .replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  const unb64u = (s) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
  const say = (msg) => { const e = document.getElementById('passkey-error'); if (e) e.textContent = msg; };

  async function challenge(fields) {
    const res = await fetch('/passkeys/challenge', {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: new URLSearchParams(fields),
    });
    const body = await res.json().catch(() => ({}));
    // Registering needs a recent sign-in at the identity provider: go there, then come back.
    if (res.status === 403 && body.sign_in) {
      say(body.detail || 'Sign in again to register a passkey.');
      window.location.assign(body.sign_in);
      return null;
    }
    if (!res.ok) throw new Error(body.detail || `challenge refused (${res.status})`);
    return body;
  }

  // The fields of an assertion, base64url.
  const assertionFields = (cred) => ({
    credential_id: b64u(cred.rawId),
    authenticator_data: b64u(cred.response.authenticatorData),
    client_data_json: b64u(cred.response.clientDataJSON),
    signature: b64u(cred.response.signature),
  });

  const reg = document.getElementById('register-form');
  if (reg) {
    reg.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      try {
        const o = await challenge({ csrf: reg.csrf.value, purpose: 'register', tenant: reg.tenant.value, next: reg.next.value });
        if (!o) return;
        // A person who already has a passkey for the tenant allows the new one with it.
        if (o.vouch) {
          const prior = await navigator.credentials.get({ publicKey: {
            challenge: unb64u(o.vouch.challenge),
            rpId: o.rp_id,
            allowCredentials: o.vouch.allow.map((id) => ({ type: 'public-key', id: unb64u(id) })),
            userVerification: 'required',
            timeout: 120000,
          } }).catch((e) => { throw new Error(`your existing passkey for this tenant did not sign (${e.message})`); });
          for (const [k, v] of Object.entries(assertionFields(prior))) reg[`vouch_${k}`].value = v;
        }
        const cred = await navigator.credentials.create({ publicKey: {
          challenge: unb64u(o.challenge),
          rp: { id: o.rp_id, name: 'actiond approvals' },
          user: { id: unb64u(o.user_id), name: o.user_name, displayName: o.user_name },
          pubKeyCredParams: [{ type: 'public-key', alg: -7 }, { type: 'public-key', alg: -8 }, { type: 'public-key', alg: -257 }],
          authenticatorSelection: { userVerification: 'required', residentKey: 'discouraged' },
          excludeCredentials: o.exclude.map((id) => ({ type: 'public-key', id: unb64u(id) })),
          attestation: o.attestation === 'direct' ? 'direct' : 'none',
          timeout: 120000,
        } });
        reg.nonce.value = o.nonce;
        reg.client_data_json.value = b64u(cred.response.clientDataJSON);
        reg.attestation_object.value = b64u(cred.response.attestationObject);
        reg.submit();
      } catch (e) { say(`The passkey was not registered: ${e.message}`); }
    });
  }

  const form = document.getElementById('approve-form');
  if (form && form.dataset.passkey === 'required') {
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (!form.reportValidity()) return;
      try {
        const o = await challenge({ csrf: form.csrf.value, purpose: 'approve', proposal: form.dataset.proposal });
        if (o.registered) {
          const cred = await navigator.credentials.get({ publicKey: {
            challenge: unb64u(o.challenge),
            rpId: o.rp_id,
            allowCredentials: o.allow.map((id) => ({ type: 'public-key', id: unb64u(id) })),
            userVerification: 'required',
            timeout: 120000,
          } });
          form.passkey_nonce.value = o.nonce;
          for (const [k, v] of Object.entries(assertionFields(cred))) form[`passkey_${k}`].value = v;
        }
        // Without a registered passkey the server answers with how to register one.
        form.submit();
      } catch (e) { say(`Not approved: the passkey did not sign (${e.message}).`); }
    });
  }
})();

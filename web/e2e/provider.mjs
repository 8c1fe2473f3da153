// A real OpenID Connect provider for the tests: oidc-provider with its built-in login form
// (devInteractions: fields `login` and `password`, any password), consent skipped, and test
// users in two tenants' groups. Prints one JSON line {"issuer": "..."} on stdout when ready.
//
// Env: CLIENT_ID, CLIENT_SECRET, REDIRECT_URI (the web app's /oidc/callback), PORT (0 = any).
import http from 'node:http';
import Provider from 'oidc-provider';

const { CLIENT_ID, CLIENT_SECRET, REDIRECT_URI } = process.env;
if (!CLIENT_ID || !CLIENT_SECRET || !REDIRECT_URI) {
  console.error('provider.mjs: CLIENT_ID, CLIENT_SECRET and REDIRECT_URI are required');
  process.exit(2);
}

export const USERS = {
  alice: { email: 'alice@acme.test', name: 'Alice Acme', groups: ['acme-approvers'] },
  bob: { email: 'bob@acme.test', name: 'Bob Acme', groups: ['acme-approvers', 'staff'] },
  dana: { email: 'dana@acme.test', name: 'Dana Acme', groups: ['acme-approvers', 'acme-admins'] },
  tina: { email: 'tina@acme.test', name: 'Tina Lead', groups: ['team-leads'] },
  frank: { email: 'frank@acme.test', name: 'Frank Finance', groups: ['finance'] },
  carol: { email: 'carol@globex.test', name: 'Carol Globex', groups: ['globex-approvers'] },
};

const server = http.createServer();
await new Promise((resolve) => server.listen(Number(process.env.PORT || 0), '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: CLIENT_ID,
    client_secret: CLIENT_SECRET,
    redirect_uris: [REDIRECT_URI],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  // Put scope claims into the ID token (the relying party reads groups from it).
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ['actiond-e2e-test-cookie-key'] },
  async findAccount(_ctx, id) {
    const u = USERS[id];
    if (!u) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: u.email, email_verified: true, name: u.name, groups: u.groups };
      },
    };
  },
  // Auto-consent: a grant with everything the client asked for.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      const g = await ctx.oidc.provider.Grant.find(grantId);
      if (g) return g;
    }
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});
provider.on('server_error', (_ctx, err) => console.error('oidc-provider server_error', err));
server.on('request', provider.callback());
console.log(JSON.stringify({ issuer }));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));

// OpenID provider for docker-compose only (oidc-provider's built-in login form: any user name
// in USERS, any password). Same pattern as web/e2e/provider.mjs. NOT for production.
// Env: ISSUER (http://127.0.0.1:9000), CLIENT_ID, CLIENT_SECRET_FILE, REDIRECT_URI.
import fs from 'node:fs';
import Provider from 'oidc-provider';

const { ISSUER, CLIENT_ID, CLIENT_SECRET_FILE, REDIRECT_URI } = process.env;
const CLIENT_SECRET = fs.readFileSync(CLIENT_SECRET_FILE, 'utf8').trim();
const USERS = {
  alice: { email: 'alice@demo.test', name: 'Alice Demo', groups: ['demo-approvers'] },
  bob: { email: 'bob@demo.test', name: 'Bob Demo', groups: ['demo-approvers'] },
  mallory: { email: 'mallory@demo.test', name: 'Mallory', groups: [] },
};
const provider = new Provider(ISSUER, {
  clients: [{
    client_id: CLIENT_ID,
    client_secret: CLIENT_SECRET,
    redirect_uris: [REDIRECT_URI],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  scopes: ['openid', 'email', 'profile', 'groups'],
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: [CLIENT_SECRET] },
  async findAccount(_ctx, id) {
    const u = USERS[id];
    if (!u) return undefined;
    return { accountId: id, async claims() { return { sub: id, email_verified: true, ...u }; } };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      const g = await ctx.oidc.provider.Grant.find(grantId);
      if (g) return g;
    }
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});
provider.listen(9000, '0.0.0.0', () => console.log(JSON.stringify({ issuer: ISSUER })));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));

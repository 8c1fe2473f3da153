// A real OAuth 2.0 authorization server for the workload-JWT tests: oidc-provider with the
// client-credentials grant issuing JWT access tokens (RFC 9068, `typ: at+jwt`) for one resource
// (the audience), signed with an ES256 key generated at start. Prints one JSON line
// {"issuer": "..."} on stdout when ready.
//
// Clients (secret = client id + "-secret", client_secret_basic):
//   support-bot  — sub is its client id.
//   delegating-bot — acts for a user (RFC 8693 §4.1): sub is DELEGATED_USER and
//                    act: {sub: "delegating-bot"}.
// Env: AUDIENCE (the resource indicator / aud), DELEGATED_USER, PORT (0 = any).
import crypto from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';

const { AUDIENCE, DELEGATED_USER } = process.env;
if (!AUDIENCE || !DELEGATED_USER) {
  console.error('issuer.mjs: AUDIENCE and DELEGATED_USER are required');
  process.exit(2);
}

const server = http.createServer();
await new Promise((resolve) => server.listen(Number(process.env.PORT || 0), '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'es256-1', alg: 'ES256', use: 'sig' };

const client = (id) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: 'client_secret_basic',
  id_token_signed_response_alg: 'ES256',
});

const provider = new Provider(issuer, {
  clients: [client('support-bot'), client('delegating-bot')],
  jwks: { keys: [signingKey] },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => AUDIENCE,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => ({
        scope: 'proposals',
        audience: resource,
        accessTokenTTL: 300,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
  formats: {
    customizers: {
      async jwt(_ctx, token, jwt) {
        if (token.clientId === 'delegating-bot') {
          jwt.payload.sub = DELEGATED_USER;
          jwt.payload.act = { sub: 'delegating-bot' };
        }
      },
    },
  },
});
provider.on('server_error', (_ctx, err) => console.error('oidc-provider server_error', err));
server.on('request', provider.callback());
console.log(JSON.stringify({ issuer }));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));

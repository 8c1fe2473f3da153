// A deliberately misbehaving OpenID provider for attack tests. It serves discovery and a JWKS
// with a fresh RSA key, answers /authorize at once (no login), and mints ID tokens at /token
// according to the current mode (GET /mode?m=...):
//   good          a correct RS256 token (the control: the web app must accept it)
//   wrong_aud     aud is another client
//   wrong_nonce   nonce differs from the one sent
//   wrong_iss     iss is another issuer
//   expired       exp in the past
//   alg_none      {"alg":"none"} and no signature
//   hs256_pubkey  HS256 "signed" with the public key as HMAC secret (key confusion)
//   bad_sig       RS256 with a corrupted signature
// Times (the ID token is otherwise good; `good` itself carries auth_time = now - 1):
//   auth_time_future    auth_time three hours ahead (an IdP whose clock runs ahead)
//   auth_time_ms        auth_time in milliseconds (read as seconds: ~55,000 years ahead)
//   auth_time_us        auth_time in microseconds (beyond any date a client can represent)
//   auth_time_negative  auth_time -1 (before 1970)
//   auth_time_fraction  auth_time with a fraction of a second
//   iat_future          iat (and exp) an hour ahead
//   nbf_future          nbf an hour ahead
//   auth_time_old       auth_time an hour ago, whatever max_age the request asked for (an IdP
//                       that ignores max_age and reuses an old sign-in)
//   no_auth_time        no auth_time claim at all
// Every code, access token and ID token it hands out is listed at GET /issued (the tests
// assert that none of them ever reaches the web service's log).
// It also serves attacker pages: /evil-form?action=URL&... (auto-submitting cross-origin POST)
// and /frame?src=URL (tries to frame a page). Prints {"issuer": "..."} when ready.
import http from 'node:http';
import crypto from 'node:crypto';

const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'RS256' };
const publicPem = publicKey.export({ format: 'pem', type: 'spki' });
const b64u = (b) => Buffer.from(b).toString('base64url');

let mode = 'good';
const codes = new Map();
const issued = [];

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  const send = (status, body, type = 'application/json') => {
    res.writeHead(status, { 'content-type': type });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  };
  if (url.pathname === '/.well-known/openid-configuration') {
    return send(200, {
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      jwks_uri: `${issuer}/jwks`,
      response_types_supported: ['code'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256'],
    });
  }
  if (url.pathname === '/jwks') return send(200, { keys: [jwk] });
  if (url.pathname === '/issued') return send(200, issued);
  if (url.pathname === '/mode') {
    mode = url.searchParams.get('m') || 'good';
    return send(200, { mode });
  }
  if (url.pathname === '/authorize') {
    const code = `code-${crypto.randomBytes(16).toString('hex')}`;
    issued.push({ code });
    codes.set(code, {
      nonce: url.searchParams.get('nonce'),
      clientId: url.searchParams.get('client_id'),
    });
    const back = new URL(url.searchParams.get('redirect_uri'));
    back.searchParams.set('code', code);
    back.searchParams.set('state', url.searchParams.get('state'));
    res.writeHead(302, { location: back.toString() });
    return res.end();
  }
  if (url.pathname === '/token' && req.method === 'POST') {
    let body = '';
    for await (const chunk of req) body += chunk;
    const form = new URLSearchParams(body);
    const rec = codes.get(form.get('code'));
    codes.delete(form.get('code'));
    if (!rec) return send(400, { error: 'invalid_grant' });
    const now = Math.floor(Date.now() / 1000);
    const iat = mode === 'iat_future' ? now + 3600 : now;
    const claims = {
      iss: mode === 'wrong_iss' ? 'http://127.0.0.1:1/other-issuer' : issuer,
      sub: 'eve',
      aud: mode === 'wrong_aud' ? 'some-other-client' : rec.clientId,
      iat,
      exp: mode === 'expired' ? now - 600 : iat + 300,
      nonce: mode === 'wrong_nonce' ? 'not-the-nonce-you-sent' : rec.nonce,
      email: 'eve@attacker.test',
      groups: ['acme-approvers', 'globex-approvers'],
    };
    const authTimes = {
      auth_time_future: now + 3 * 3600,
      auth_time_ms: now * 1000,
      auth_time_us: now * 1000000,
      auth_time_negative: -1,
      auth_time_fraction: now - 10 + 0.5,
      auth_time_old: now - 3600,
    };
    if (mode !== 'no_auth_time') claims.auth_time = mode in authTimes ? authTimes[mode] : now - 1;
    if (mode === 'nbf_future') claims.nbf = now + 3600;
    let header = { alg: 'RS256', typ: 'JWT', kid: 'k1' };
    if (mode === 'alg_none') header = { alg: 'none', typ: 'JWT' };
    if (mode === 'hs256_pubkey') header = { alg: 'HS256', typ: 'JWT', kid: 'k1' };
    const input = `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(claims))}`;
    let sig = '';
    if (header.alg === 'RS256') {
      const s = crypto.sign('sha256', Buffer.from(input), privateKey);
      if (mode === 'bad_sig') s[10] ^= 0xff;
      sig = b64u(s);
    } else if (header.alg === 'HS256') {
      sig = b64u(crypto.createHmac('sha256', publicPem).update(input).digest());
    }
    const answer = {
      access_token: `at-${crypto.randomBytes(16).toString('hex')}`,
      token_type: 'Bearer',
      expires_in: 300,
      id_token: `${input}.${sig}`,
    };
    issued.push({ access_token: answer.access_token, id_token: answer.id_token });
    return send(200, answer);
  }
  if (url.pathname === '/evil-form') {
    const target = url.searchParams.get('action');
    const fields = [...url.searchParams].filter(([k]) => k !== 'action')
      .map(([k, v]) => `<input type="hidden" name="${k}" value="${v.replace(/"/g, '&quot;')}">`).join('');
    return send(200, `<!doctype html><title>You won a prize</title><form id="f" method="post" action="${target}">${fields}</form><script>document.getElementById('f').submit()</script>`, 'text/html');
  }
  if (url.pathname === '/frame') {
    return send(200, `<!doctype html><title>framing</title><h1>Framing attempt</h1><iframe id="victim" width="900" height="500" src="${url.searchParams.get('src')}"></iframe>`, 'text/html');
  }
  send(404, { error: 'not found' });
});
await new Promise((resolve) => server.listen(Number(process.env.PORT || 0), '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
console.log(JSON.stringify({ issuer }));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));

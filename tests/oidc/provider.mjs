// A real OpenID provider (node-oidc-provider) for pactd's tests
// (tests/it/oidc_login.rs): one confidential client (pactd), two test
// accounts, a plain login form whose optional one-time code decides the
// `amr`/`acr` the ID token reports, consent granted on sight, and
// Back-Channel Logout to pactd when a session ends at /session/end.
//
// Configuration comes from the environment:
//   OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI, OIDC_BACKCHANNEL_URI
// and, optionally, a second client for pactd that authenticates with
// private_key_jwt (OpenID Connect Core §9) against pactd's published keys:
//   OIDC_JWT_CLIENT_ID, OIDC_JWT_JWKS_URI
// It listens on a free loopback port and prints one JSON line
// {"issuer": "http://127.0.0.1:PORT"} on standard output once ready.

import http from 'node:http';
import Provider from 'oidc-provider';

// Standard output carries only the ready line: the test stops reading after
// it, so everything the library prints goes to standard error instead.
const ready = process.stdout.write.bind(process.stdout);
console.log = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`missing ${name}`);
    process.exit(2);
  }
  return v;
};

// Test accounts: id -> password and claims. The one-time code is fixed:
// this provider only has to *say* whether a second factor was used.
const ACCOUNTS = {
  'ann-7f3a': { login: 'ann', password: 'ann-password', email: 'ann@shop.example', email_verified: true },
  'bob-91c2': { login: 'bob', password: 'bob-password', email: 'bob@shop.example', email_verified: false },
};
const OTP = '123456';

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const clients = [{
  client_id: env('OIDC_CLIENT_ID'),
  client_secret: env('OIDC_CLIENT_SECRET'),
  redirect_uris: [env('OIDC_REDIRECT_URI')],
  response_types: ['code'],
  grant_types: ['authorization_code'],
  token_endpoint_auth_method: 'client_secret_basic',
  backchannel_logout_uri: env('OIDC_BACKCHANNEL_URI'),
  backchannel_logout_session_required: true,
}];
if (process.env.OIDC_JWT_CLIENT_ID) {
  // The provider fetches the client's keys from jwks_uri (pactd's JWKS) and
  // accepts only ES256 assertions from it.
  clients.push({
    client_id: process.env.OIDC_JWT_CLIENT_ID,
    redirect_uris: [env('OIDC_REDIRECT_URI')],
    response_types: ['code'],
    grant_types: ['authorization_code'],
    token_endpoint_auth_method: 'private_key_jwt',
    token_endpoint_auth_signing_alg: 'ES256',
    jwks_uri: env('OIDC_JWT_JWKS_URI'),
    backchannel_logout_uri: env('OIDC_BACKCHANNEL_URI'),
    backchannel_logout_session_required: true,
  });
}

const provider = new Provider(issuer, {
  clients,
  pkce: { required: () => true },
  // Claims of the granted scopes go into the ID token itself, as Keycloak,
  // Auth0 and Entra ID do by default.
  conformIdTokenClaims: false,
  // acr, amr and auth_time in every ID token, as providers that do step-up send them.
  claims: {
    acr: null,
    amr: null,
    auth_time: null,
    sid: null,
    iss: null,
    openid: ['sub', 'acr', 'amr', 'auth_time'],
    email: ['email', 'email_verified'],
  },
  acrValues: ['urn:shop:pwd', 'urn:shop:mfa'],
  cookies: { keys: ['pactd-test-provider-cookie-key-0001'] },
  features: {
    devInteractions: { enabled: false },
    backchannelLogout: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      logoutSource: async (ctx, form) => {
        ctx.body = `<!doctype html><title>Sign out</title>${form}
<button form="op.logoutForm" type="submit" name="logout" value="yes">Sign out</button>`;
      },
    },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  findAccount: async (ctx, id) => {
    const a = ACCOUNTS[id];
    if (!a) return undefined;
    return {
      accountId: id,
      claims: async () => ({ sub: id, email: a.email, email_verified: a.email_verified }),
    };
  },
});
provider.on('backchannel.error', (err) => console.error('backchannel.error', err.message));
provider.on('server_error', (ctx, err) => console.error('server_error', err));

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginForm(uid, error) {
  return `<!doctype html><title>Sign in</title>
${error ? `<p class="error">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>User <input name="login"></label>
<label>Password <input name="password" type="password"></label>
<label>One-time code (optional) <input name="otp"></label>
<button type="submit">Sign in</button>
</form>`;
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 10000) throw new Error('body too large');
  }
  return new URLSearchParams(body);
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) {
    res.writeHead(400).end('wrong interaction');
    return;
  }
  const { prompt, params, session } = details;
  if (prompt.name === 'login') {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/html' }).end(loginForm(uid));
      return;
    }
    const form = await readForm(req);
    const id = Object.keys(ACCOUNTS).find((k) => ACCOUNTS[k].login === form.get('login'));
    if (!id || ACCOUNTS[id].password !== form.get('password')) {
      res.writeHead(401, { 'content-type': 'text/html' }).end(loginForm(uid, 'Wrong user or password'));
      return;
    }
    const mfa = form.get('otp') === OTP;
    await provider.interactionFinished(req, res, {
      login: {
        accountId: id,
        amr: mfa ? ['pwd', 'otp'] : ['pwd'],
        acr: mfa ? 'urn:shop:mfa' : 'urn:shop:pwd',
      },
    }, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name === 'consent') {
    // Consent is granted on sight: the tests are about pactd's consent page.
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const d = prompt.details;
    if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
    if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
    if (d.missingResourceScopes) {
      for (const [indicator, scopes] of Object.entries(d.missingResourceScopes)) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }
  res.writeHead(400).end(`unexpected prompt ${prompt.name} (${action})`);
}

const callback = provider.callback();
server.on('request', async (req, res) => {
  const m = /^\/interaction\/([^/?]+)(\/login)?(\?.*)?$/.exec(req.url);
  if (!m) {
    callback(req, res);
    return;
  }
  try {
    await interaction(req, res, m[1], m[2] ? 'login' : 'show');
  } catch (err) {
    console.error('interaction error', err);
    if (!res.headersSent) res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err.message));
  }
});

ready(`${JSON.stringify({ issuer })}\n`);

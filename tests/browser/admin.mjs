// The staff console's journeys in Debian's Chromium, driven by
// playwright-core. Run by tests/it/admin_browser.rs:
//
//   node admin.mjs console   with a JSON object on stdin
//
// Prints one JSON line on success; exits non-zero with a message otherwise.
// Every page visited is saved as a screenshot under `shots`.
import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const journey = process.argv[2];
const input = JSON.parse(await new Promise((resolve) => {
  let data = '';
  process.stdin.on('data', (c) => { data += c; });
  process.stdin.on('end', () => resolve(data));
}));
mkdirSync(input.shots, { recursive: true });

// RFC 4648 base32 (no padding) to bytes.
function base32(text) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let buffer = 0; let bits = 0; const out = [];
  for (const c of text.replace(/\s/g, '')) {
    buffer = (buffer << 5) | alphabet.indexOf(c);
    bits += 5;
    if (bits >= 8) { bits -= 8; out.push((buffer >> bits) & 0xff); }
  }
  return Buffer.from(out);
}

// RFC 6238 TOTP (SHA-1, 30 s, 6 digits).
function totp(secret, offsetSteps = 0) {
  const step = Math.floor(Date.now() / 1000 / 30) + offsetSteps;
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = createHmac('sha1', secret).update(counter).digest();
  const offset = mac[mac.length - 1] & 0x0f;
  const bin = ((mac[offset] & 0x7f) << 24) | (mac[offset + 1] << 16) | (mac[offset + 2] << 8) | mac[offset + 3];
  return String(bin % 1_000_000).padStart(6, '0');
}

const browser = await chromium.launch({
  executablePath: input.chromium || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(15_000);
let shot = 0;
async function snap(name) {
  shot += 1;
  await page.screenshot({ path: join(input.shots, `${String(shot).padStart(2, '0')}-${name}.png`), fullPage: true });
}
async function expectHeading(text) {
  await page.getByRole('heading', { level: 1 }).filter({ hasText: text }).first().waitFor();
}

async function signInWithPassword(email) {
  await page.goto(`${input.base}/admin`);
  await expectHeading('Staff sign-in');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(input.password);
  await page.getByRole('button', { name: 'Continue' }).click();
}

async function signOut() {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expectHeading('Staff sign-in');
}


// A virtual authenticator (CDP WebAuthn domain), as tests/browser/journeys.mjs does for customers.
async function virtualAuthenticator() {
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true,
               hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
}

async function signInWithTotp(email, hex) {
  await signInWithPassword(email);
  await expectHeading('Second factor');
  await page.getByLabel('The 6-digit code your authenticator app shows').fill(totp(Buffer.from(hex, 'hex')));
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expectHeading('Overview');
}

// JSON POST from the page, with the session's CSRF token as webauthn.js sends it.
async function postJson(url, body, csrf) {
  return page.evaluate(async ({ url, body, csrf }) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
      body: JSON.stringify(body),
    });
    let json = null;
    try { json = await res.json(); } catch (_) { json = null; }
    return { status: res.status, json };
  }, { url, body, csrf });
}

async function useRecoveryCode(code) {
  await signInWithPassword(input.admin);
  await expectHeading('Second factor');
  await page.getByText('Lost your phone or passkey? Use a recovery code').click();
  await page.getByLabel('Recovery code').fill(code);
  await page.getByRole('button', { name: 'Sign in with the recovery code' }).click();
}

// Staff second factors: an admin adds a passkey and signs in with it; makes
// recovery codes and signs in with one, which then fails a second time; a
// viewer's session cannot add a credential to another admin.
async function factorsJourney() {
  await virtualAuthenticator();
  await signInWithTotp(input.admin, input.admin_totp_hex);
  await page.getByRole('link', { name: `${input.admin} (operator)` }).click();
  await expectHeading('Your account');
  await page.getByLabel('Name for the new passkey (optional)').fill('Work laptop');
  await page.getByRole('button', { name: 'Add a passkey' }).click();
  await page.locator('#done').filter({ hasText: 'Passkey added.' }).waitFor();
  await page.getByRole('cell', { name: 'Work laptop' }).waitFor();
  result.passkey_id = (await page.locator('#passkeys td[id^="passkey-"]').first().getAttribute('id')).slice('passkey-'.length);
  await page.getByRole('button', { name: 'Make new recovery codes' }).click();
  await expectHeading('Your recovery codes');
  await snap('recovery-codes');
  result.codes = await page.locator('#recovery-codes code').allTextContents();
  await page.getByRole('link', { name: 'I saved them — continue' }).click();
  await expectHeading('Your account');
  await snap('account');
  // A ceremony this session starts and leaves open (the viewer will try to finish it).
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const open = await postJson('/admin/passkeys/register/start', {}, csrf);
  if (open.status !== 200) throw new Error(`register/start: ${open.status}`);
  result.open_ceremony = open.json.ceremonyId;
  await signOut();

  // Password, then the passkey instead of the app's code.
  await signInWithPassword(input.admin);
  await expectHeading('Second factor');
  await snap('second-factor');
  await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
  await expectHeading('Overview');
  await signOut();

  // A recovery code works once...
  await useRecoveryCode(result.codes[0]);
  await expectHeading('Your account');
  result.after_recovery = await page.textContent('main');
  await signOut();
  // ...and not twice.
  await useRecoveryCode(result.codes[0]);
  await expectHeading('Second factor');
  result.reuse_error = await page.getByRole('alert').textContent();

  // The viewer: what it registers is its own, whatever the request says, and
  // it cannot finish the admin's ceremony or remove the admin's passkey.
  await page.goto(`${input.base}/admin`);
  await expectHeading('Staff sign-in');
  await signInWithTotp(input.viewer, input.viewer_totp_hex);
  const viewerCsrf = await page.locator('input[name=csrf]').first().inputValue();
  result.viewer = await page.evaluate(async ({ admin, adminId, openCeremony, passkeyId, csrf }) => {
    const b64 = (v) => { let s = String(v).replace(/-/g, '+').replace(/_/g, '/'); while (s.length % 4) s += '=';
      return Uint8Array.from(atob(s), (c) => c.charCodeAt(0)).buffer; };
    const enc = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    const post = async (url, body, token) => {
      const res = await fetch(url, { method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': token }, body: JSON.stringify(body) });
      let json = null; try { json = await res.json(); } catch (_) { json = null; }
      return { status: res.status, json };
    };
    const out = {};
    out.no_csrf = (await post('/admin/passkeys/register/start', {}, '')).status;
    const start = await post('/admin/passkeys/register/start', { admin: adminId, email: admin }, csrf);
    out.start_status = start.status;
    out.user_name = start.json.publicKey.user.name;
    const pk = start.json.publicKey;
    pk.challenge = b64(pk.challenge);
    pk.user.id = b64(pk.user.id);
    pk.excludeCredentials = (pk.excludeCredentials || []).map((c) => ({ ...c, id: b64(c.id) }));
    const cred = await navigator.credentials.create({ publicKey: pk });
    const answer = { id: cred.id, rawId: enc(cred.rawId), type: cred.type, extensions: {},
      response: { attestationObject: enc(cred.response.attestationObject), clientDataJSON: enc(cred.response.clientDataJSON) } };
    // The admin's open ceremony: bound to the admin's session, refused here.
    out.finish_other = (await post('/admin/passkeys/register/finish',
      { ceremonyId: openCeremony, name: 'planted', credential: answer, admin: adminId }, csrf)).status;
    // Its own ceremony, with the admin named in the body: the passkey is the viewer's.
    out.finish_own = (await post('/admin/passkeys/register/finish',
      { ceremonyId: start.json.ceremonyId, name: 'planted', credential: answer, admin: adminId, email: admin }, csrf)).status;
    const del = await fetch(`/admin/passkeys/${passkeyId}/delete`, { method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf }), redirect: 'manual' });
    out.delete_other = del.status;
    return out;
  }, { admin: input.admin, adminId: input.admin_id, openCeremony: result.open_ceremony,
       passkeyId: result.passkey_id, csrf: viewerCsrf });
}

const result = {};
try {
  if (journey === 'factors') {
    await factorsJourney();
    console.log(JSON.stringify({ ok: true, ...result }));
  } else {
  if (journey !== 'console') throw new Error(`unknown journey ${journey}`);

    // 1. The owner's first sign-in: password, then enrol the authenticator app.
    await page.goto(`${input.base}/admin`);
    await expectHeading('Staff sign-in');
    await snap('sign-in');
    await signInWithPassword(input.owner);
    await expectHeading('Set up your authenticator app');
    await snap('totp-setup');
    const secret = base32(await page.locator('#totp-secret').textContent());
    await page.getByLabel('Code from the app').fill(totp(secret));
    await page.getByRole('button', { name: 'Confirm and sign in' }).click();
    await expectHeading('Overview');
    await snap('overview');
    await page.getByRole('link', { name: 'Agent platforms' }).click();
    await expectHeading('Agent platforms');
    await page.getByLabel('Issuer (as its PA-JWTs carry it)').fill(input.new_issuer);
    await page.getByLabel('JWKS URI').fill(`${input.new_issuer}/jwks.json`);
    await page.getByLabel('Name').fill('New Agent');
    await page.getByRole('button', { name: 'Register' }).click();
    await expectHeading('Agent platforms');
    await page.getByRole('cell', { name: input.new_issuer, exact: true }).waitFor();
    await snap('agents');
    // The owner's other pages (each opens; the screenshots are in docs/).
    await page.goto(`${input.base}/admin/agents/disable?issuer=${encodeURIComponent(input.issuer)}`);
    await expectHeading('Disable');
    await snap('agent-disable');
    await page.goto(`${input.base}/admin/customers?q=${encodeURIComponent(input.customer_email)}`);
    await expectHeading('Customers');
    await page.getByRole('button', { name: 'Sign out everywhere' }).waitFor();
    await snap('customers');
    await page.getByRole('link', { name: 'Brands' }).click();
    await expectHeading('Brands');
    await snap('brands');
    await page.goto(`${input.base}/admin/brands/demo`);
    await page.locator('#tools').getByRole('cell', { name: 'get_order', exact: true }).waitFor();
    await snap('brand');
    await page.getByRole('link', { name: 'Signing keys' }).click();
    await expectHeading('Signing keys');
    await snap('keys');
    await signOut();

    // 2. The operator finds the person's grant and revokes it.
    await signInWithPassword(input.operator);
    await expectHeading('Second factor');
    await page.getByLabel('The 6-digit code your authenticator app shows').fill(totp(Buffer.from(input.operator_totp_hex, 'hex')));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expectHeading('Overview');
    await page.getByRole('link', { name: 'Grants' }).click();
    await expectHeading('Grants');
    await page.getByLabel('Customer (email, id or subject)').fill(input.customer);
    await page.getByRole('button', { name: 'Search' }).click();
    await snap('grants');
    await page.getByRole('link', { name: input.grant_id }).click();
    await expectHeading('Grant');
    result.chain_text = await page.textContent('#chain');
    await snap('grant');
    await page.getByLabel('Reason (optional;').fill('customer asked by phone');
    await page.getByRole('button', { name: 'Revoke this grant' }).click();
    // The confirmation says what the customer will read; nothing is done yet.
    result.confirm_text = await page.textContent('#customer-sees');
    await snap('grant-revoke-confirm');
    await page.getByRole('button', { name: 'Yes, revoke' }).click();
    result.notice_text = await page.textContent('#notice');
    await page.locator('#grant-state').filter({ hasText: 'revoked' }).waitFor();
    await snap('grant-revoked');
    await page.getByRole('link', { name: 'Audit log' }).click();
    await expectHeading('Audit log');
    await snap('audit');
    result.audit_text = await page.textContent('#audit');
    await signOut();

    // 3. The viewer sees the grant but no button, and a forged POST is refused.
    await signInWithPassword(input.viewer);
    await expectHeading('Second factor');
    await page.getByLabel('The 6-digit code your authenticator app shows').fill(totp(Buffer.from(input.viewer_totp_hex, 'hex')));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expectHeading('Overview');
    await page.goto(`${input.base}/admin/grants/${input.other_grant_id}`);
    await expectHeading('Grant');
    await snap('grant-as-viewer');
    result.viewer_buttons = await page.getByRole('button', { name: 'Revoke this grant' }).count();
    const csrf = await page.locator('input[name=csrf]').first().inputValue();
    result.viewer_post_status = await page.evaluate(async ({ id, csrf }) => {
      const res = await fetch(`/admin/grants/${id}/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf }),
        redirect: 'manual',
      });
      return res.status;
    }, { id: input.other_grant_id, csrf });
    console.log(JSON.stringify({ ok: true, ...result }));
  }
} catch (e) {
  await snap('failure').catch(() => {});
  console.error(`journey ${journey} failed on ${page.url()}: ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}

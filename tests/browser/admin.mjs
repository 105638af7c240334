// The staff console's journeys in Debian's Chromium, driven by
// playwright-core. Run by tests/it/admin_browser.rs:
//
//   node admin.mjs console   with a JSON object on stdin
//
// Prints one JSON line on success; exits non-zero with a message otherwise.
// Every page visited is saved as a screenshot under `shots`.
import { createHmac } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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

// Issue 30, item 3: what a page looks like at a phone's and a laptop's
// width, measured rather than eyeballed. For each width: how far the page
// scrolls sideways; elements whose own text (3+ characters) got a box
// narrower than three of its font's characters (text one letter per line);
// words inside a table header or the title that break across lines; and
// controls smaller than 16 px text or 40 px height.
function measurePage() {
  const ctx = document.createElement('canvas').getContext('2d');
  const label = (el) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''} "${el.textContent.trim().replace(/\s+/g, ' ').slice(0, 40)}"`;
  const shown = (el) => {
    if (el.closest('.visually-hidden, option, select, script, style, template, head')) return false;
    const s = getComputedStyle(el);
    const r = el.getBoundingClientRect();
    return s.display !== 'none' && s.visibility !== 'hidden' && r.width > 0 && r.height > 0;
  };
  const out = { overflow: document.scrollingElement.scrollWidth - window.innerWidth, narrow: [], broken: [], small: [], cells: 0, headers: 0 };
  out.wide = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (!shown(el)) continue;
    // What sticks out past the window, outside a box that scrolls on its own.
    if (el.getBoundingClientRect().right > window.innerWidth + 1 && !el.parentElement.closest('.table-wrap')
        && out.wide.length < 5) out.wide.push(`${label(el)}: right edge at ${el.getBoundingClientRect().right.toFixed(0)} px`);
    if (el.matches('td')) out.cells += 1;
    const own = [...el.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join('');
    if (own.replace(/\s/g, '').length >= 3) {
      const s = getComputedStyle(el);
      ctx.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
      // A text narrower than its longest word (capped at three characters)
      // has been broken inside a word: "ada" in 27 px is whole, "Custom|er" is not.
      const longest = Math.max(...own.split(/\s+/).map((w) => ctx.measureText(w).width));
      const three = Math.min(ctx.measureText('nnn').width, longest) - 0.5;
      const box = el.getBoundingClientRect().width - ['paddingLeft', 'paddingRight', 'borderLeftWidth', 'borderRightWidth']
        .reduce((sum, k) => sum + (parseFloat(s[k]) || 0), 0);
      if (box < three) out.narrow.push(`${label(el)}: ${box.toFixed(1)} px < ${three.toFixed(1)} px`);
    }
    if (el.matches('th, .brand, .top nav a')) {
      if (el.matches('th')) out.headers += 1;
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (const word of node.textContent.matchAll(/\S+/g)) {
          const range = document.createRange();
          range.setStart(node, word.index);
          range.setEnd(node, word.index + word[0].length);
          const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
          if (lines.size > 1) out.broken.push(`${label(el)}: "${word[0]}" on ${lines.size} lines`);
        }
      }
    }
    if (el.matches('input:not([type=hidden]):not([type=checkbox]):not([type=radio]), select, button, textarea')) {
      const s = getComputedStyle(el);
      const r = el.getBoundingClientRect();
      if (parseFloat(s.fontSize) < 16 || r.height < 40) {
        out.small.push(`${el.tagName.toLowerCase()}#${el.id || el.name || ''}: ${r.width.toFixed(0)}x${r.height.toFixed(0)} px, ${s.fontSize}`);
      }
    }
  }
  return out;
}
const layout = [];
const axeSource = readFileSync(new URL('./node_modules/axe-core/axe.min.js', import.meta.url), 'utf8');
// axe-core's findings of any impact; a phone in light, a laptop in dark, so
// each page is seen in both schemes without doubling the journey's time.
async function axe(scheme) {
  await page.emulateMedia({ colorScheme: scheme });
  await page.evaluate(axeSource);
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
  });
  await page.emulateMedia({ colorScheme: 'light' });
  return found;
}
async function measure(name) {
  for (const width of [390, 1280]) {
    await page.setViewportSize({ width, height: 900 });
    const scheme = width === 390 ? 'light' : 'dark';
    layout.push({ page: name, width, ...(await page.evaluate(measurePage)), scheme, axe: await axe(scheme) });
    if (width === 390) await page.screenshot({ path: join(input.shots, `${name}-390.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
  // Kept on disk as it grows, so a journey that fails later still leaves its figures.
  writeFileSync(join(input.shots, 'layout.json'), JSON.stringify(layout, null, 1));
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
  await measure('recovery-codes');
  result.codes = await page.locator('#recovery-codes code').allTextContents();
  await page.getByRole('link', { name: 'I saved them — continue' }).click();
  await expectHeading('Your account');
  await snap('account');
  await measure('account');
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
  await measure('second-factor');
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
    console.log(JSON.stringify({ ok: true, ...result, layout }));
  } else {
  if (journey !== 'console') throw new Error(`unknown journey ${journey}`);

    // 1. The owner's first sign-in: password, then enrol the authenticator app.
    await page.goto(`${input.base}/admin`);
    await expectHeading('Staff sign-in');
    await snap('sign-in');
    await measure('sign-in');
    await signInWithPassword(input.owner);
    await expectHeading('Set up your authenticator app');
    await snap('totp-setup');
    const secret = base32(await page.locator('#totp-secret').textContent());
    await page.getByLabel('Code from the app').fill(totp(secret));
    await page.getByRole('button', { name: 'Confirm and sign in' }).click();
    await expectHeading('Overview');
    await snap('overview');
    await measure('overview');
    await page.getByRole('link', { name: 'Agent platforms' }).click();
    await expectHeading('Agent platforms');
    await page.getByLabel('Issuer (as its PA-JWTs carry it)').fill(input.new_issuer);
    await page.getByLabel('JWKS URI').fill(`${input.new_issuer}/jwks.json`);
    await page.getByLabel('Name').fill('New Agent');
    await page.getByRole('button', { name: 'Register' }).click();
    await expectHeading('Agent platforms');
    await page.getByRole('cell', { name: input.new_issuer, exact: true }).waitFor();
    await snap('agents');
    await measure('agents');
    // The owner's other pages (each opens; the screenshots are in docs/).
    await page.goto(`${input.base}/admin/agents/disable?issuer=${encodeURIComponent(input.issuer)}`);
    await expectHeading('Disable');
    await snap('agent-disable');
    await measure('agent-disable');
    await page.goto(`${input.base}/admin/customers?q=${encodeURIComponent(input.customer_email)}`);
    await expectHeading('Customers');
    await page.getByRole('button', { name: 'Sign out everywhere' }).waitFor();
    await snap('customers');
    await measure('customers');
    await page.getByRole('link', { name: 'Brands' }).click();
    await expectHeading('Brands');
    await snap('brands');
    await measure('brands');
    await page.goto(`${input.base}/admin/brands/demo`);
    await page.locator('#tools').getByRole('cell', { name: 'get_order', exact: true }).waitFor();
    await snap('brand');
    await measure('brand');
    await page.getByRole('link', { name: 'Signing keys' }).click();
    await expectHeading('Signing keys');
    await snap('keys');
    await measure('keys');
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
    await measure('grants');
    // Item 2: the customer's email beside the subject, the platform's name
    // beside its issuer; then the agent filter picked by name.
    result.grants_text = await page.textContent('main table');
    await page.getByLabel('Customer (email, id or subject)').fill('');
    result.agent_filter_rows = {};
    for (const name of [input.agent_name, 'New Agent']) {
      await page.getByLabel('Agent platform').selectOption({ label: name });
      await page.getByRole('button', { name: 'Search' }).click();
      await expectHeading('Grants');
      result.agent_filter_rows[name] = await page.locator('main tbody tr').count();
    }
    await page.getByLabel('Agent platform').selectOption({ label: input.agent_name });
    await page.getByRole('button', { name: 'Search' }).click();
    await expectHeading('Grants');
    result.agent_filter_selected = await page.getByLabel('Agent platform').inputValue();
    await page.getByRole('link', { name: input.grant_id }).click();
    await expectHeading('Grant');
    result.chain_text = await page.textContent('#chain');
    await snap('grant');
    await measure('grant');
    result.grant_customer = await page.textContent('#grant-customer');
    result.grant_agent = await page.textContent('#grant-agent');
    result.grant_approved = await page.textContent('#grant-approved');
    await page.getByLabel('Reason (optional;').fill('customer asked by phone');
    await page.getByRole('button', { name: 'Revoke this grant' }).click();
    // The confirmation says what the customer will read; nothing is done yet.
    result.confirm_text = await page.textContent('#customer-sees');
    await snap('grant-revoke-confirm');
    await measure('grant-revoke-confirm');
    await page.getByRole('button', { name: 'Yes, revoke' }).click();
    result.notice_text = await page.textContent('#notice');
    await page.locator('#grant-state').filter({ hasText: 'revoked' }).waitFor();
    await snap('grant-revoked');
    await page.getByRole('link', { name: 'Audit log' }).click();
    await expectHeading('Audit log');
    await snap('audit');
    await measure('audit');
    result.audit_text = await page.textContent('#audit');
    const firstTime = page.locator('#audit tbody td').first();
    result.audit_time = { text: await firstTime.textContent(), title: await firstTime.getAttribute('title') };
    // The raw record of the revocation: hidden, then shown by one click.
    const revoked = page.locator('#audit tbody tr', { hasText: 'grant.revoke' }).first();
    result.audit_raw_hidden = !(await revoked.locator('code').first().isVisible());
    await revoked.locator('summary').click();
    result.audit_raw_shown = await revoked.locator('code').first().isVisible();
    await measure('audit-record-open');
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
    console.log(JSON.stringify({ ok: true, ...result, layout }));
  }
} catch (e) {
  await snap('failure').catch(() => {});
  console.error(`journey ${journey} failed on ${page.url()}: ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}

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

const result = {};
try {
  if (journey !== 'console') throw new Error(`unknown journey ${journey}`);

  // 1. The owner's first sign-in: password, then enrol the authenticator app.
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
  await signOut();

  // 2. The operator finds the person's grant and revokes it.
  await signInWithPassword(input.operator);
  await expectHeading('Authenticator code');
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
  await page.getByLabel('Reason (optional)').fill('customer asked by phone');
  await page.getByRole('button', { name: 'Revoke this grant' }).click();
  await page.locator('#grant-state').filter({ hasText: 'revoked' }).waitFor();
  await snap('grant-revoked');
  await page.getByRole('link', { name: 'Audit log' }).click();
  await expectHeading('Audit log');
  await snap('audit');
  result.audit_text = await page.textContent('#audit');
  await signOut();

  // 3. The viewer sees the grant but no button, and a forged POST is refused.
  await signInWithPassword(input.viewer);
  await expectHeading('Authenticator code');
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
} catch (e) {
  await snap('failure').catch(() => {});
  console.error(`journey ${journey} failed on ${page.url()}: ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}

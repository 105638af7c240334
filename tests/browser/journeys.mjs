// Browser journeys through pactd's pages, in Debian's Chromium driven by
// playwright-core. Run by tests/it/browser.rs:
//
//   node journeys.mjs <journey>   with a JSON object on stdin
//
// Prints one JSON line on success; exits non-zero with a message otherwise.
// Every page visited is saved as a screenshot under `shots` (a directory).
import { createHmac } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const journey = process.argv[2];
const input = JSON.parse(await new Promise((resolve) => {
  let data = '';
  process.stdin.on('data', (c) => { data += c; });
  process.stdin.on('end', () => resolve(data));
}));
mkdirSync(input.shots, { recursive: true });

// RFC 6238 TOTP (SHA-1, 30 s, 6 digits), from a hex secret.
function totp(hexSecret, offsetSteps = 0) {
  const step = Math.floor(Date.now() / 1000 / 30) + offsetSteps;
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = createHmac('sha1', Buffer.from(hexSecret, 'hex')).update(counter).digest();
  const offset = mac[mac.length - 1] & 0x0f;
  const bin = ((mac[offset] & 0x7f) << 24) | (mac[offset + 1] << 16) | (mac[offset + 2] << 8) | mac[offset + 3];
  return String(bin % 1_000_000).padStart(6, '0');
}

const browser = await chromium.launch({
  executablePath: input.chromium || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
// The accessibility journey injects axe-core, which the pages' CSP (rightly) forbids.
// `locale` is what Chromium sends as Accept-Language; `javascript: false`
// proves a journey needs no script.
const context = await browser.newContext({
  viewport: { width: input.width || 390, height: 844 },
  bypassCSP: journey === 'a11y' || journey === 'step-up-mfa',
  locale: input.locale || 'en-US',
  javaScriptEnabled: input.javascript !== false,
});
const page = await context.newPage();
page.setDefaultTimeout(15_000);
let shot = 0;
async function snap(name) {
  shot += 1;
  await page.screenshot({ path: join(input.shots, `${String(shot).padStart(2, '0')}-${name}.png`), fullPage: true });
}
// The words the journeys look for, in each language of the pages.
const WORDS = {
  en: {
    connect: 'Connect your agent', continue: 'Continue', signInTo: 'Sign in to', email: 'Email',
    password: 'Password', signIn: 'Sign in', oneMore: 'One more step',
    totp: '6-digit code from your authenticator app', allow: 'Allow', approve: 'Approve', done: 'Done',
    account: 'Connected agents', removeAccess: 'Remove access…', removeHeading: 'Remove',
    notFound: 'Not found', forgot: 'Forgot your password', sendLink: 'Send the link',
    skip: 'Skip to content',
  },
  de: {
    connect: 'Ihren Agenten verbinden', continue: 'Weiter', signInTo: 'anmelden', email: 'E-Mail-Adresse',
    password: 'Passwort', signIn: 'Anmelden', oneMore: 'Noch ein Schritt',
    totp: '6-stelliger Code aus Ihrer Authenticator-App', allow: 'Darf', approve: 'Zustimmen', done: 'Fertig',
    account: 'Verbundene Agenten', removeAccess: 'Zugriff entziehen …', removeHeading: 'Zugriff entziehen',
    notFound: 'Nicht gefunden', forgot: 'Passwort vergessen', sendLink: 'Link senden',
    skip: 'Zum Inhalt springen',
  },
};
const W = WORDS[input.lang || 'en'];

async function expectHeading(text) {
  await page.getByRole('heading', { level: 1 }).filter({ hasText: text }).first().waitFor();
}

// A virtual authenticator (CDP WebAuthn domain) for passkey journeys.
async function virtualAuthenticator() {
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true,
               hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
}

// From verification_uri_complete to the sign-in page: the code is pre-filled, still confirmed by a click.
async function openLinkAndConfirm() {
  await page.goto(input.link);
  await expectHeading('Connect your agent');
  const typed = await page.getByLabel('Code').inputValue();
  if (typed.replace(/-/g, '') !== input.user_code.replace(/-/g, '')) throw new Error(`code not pre-filled: ${typed}`);
  await snap('device-code');
  await page.getByRole('button', { name: 'Continue' }).click();
}

async function signInWithPasswordAndTotp() {
  await expectHeading('Sign in to');
  await snap('sign-in');
  await page.getByLabel('Email').fill(input.email);
  await page.getByLabel('Password').fill(input.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expectHeading('One more step');
  await snap('second-factor');
  // A second sign-in in one run takes the next step's code (each code is used once).
  await page.getByLabel('6-digit code from your authenticator app').fill(totp(input.totp_secret_hex, input.totp_offset || 0));
  await page.getByRole('button', { name: 'Continue', exact: true }).click();
}

let consentText = null;
async function consent(untick) {
  await expectHeading('Allow');
  const body = await page.textContent('main');
  consentText = await page.locator('main').innerText();
  for (const expected of input.expect_on_consent || []) {
    if (!body.includes(expected)) throw new Error(`consent page lacks ${JSON.stringify(expected)}`);
  }
  for (const description of untick || []) {
    await page.getByLabel(description).uncheck();
  }
  await snap('consent');
  await page.getByRole('button', { name: 'Approve' }).click();
  await expectHeading('Done');
  await snap('done');
}

// RFC 4648 base32 (the key a TOTP setup page shows, in groups of four) to hex.
function base32ToHex(text) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const ch of text.replace(/[\s=]/g, '').toUpperCase()) {
    const v = alphabet.indexOf(ch);
    if (v < 0) throw new Error(`not base32: ${ch}`);
    bits += v.toString(2).padStart(5, '0');
  }
  let hex = '';
  for (let i = 0; i + 8 <= bits.length; i += 8) hex += parseInt(bits.slice(i, i + 8), 2).toString(16).padStart(2, '0');
  return hex;
}

// axe-core on the page as it is, light and dark: every violation of any impact.
const axeFindings = [];
async function axeBoth(name) {
  const axeSource = readFileSync(new URL('./node_modules/axe-core/axe.min.js', import.meta.url), 'utf8');
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.evaluate(axeSource);
    const found = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
    });
    for (const v of found) axeFindings.push({ page: name, scheme, ...v });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

// How many lines an element's text takes (a code broken across lines takes two).
async function lineCount(locator) {
  return locator.evaluate((el) => {
    const range = document.createRange();
    range.selectNodeContents(el);
    const tops = new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top)));
    return tops.size;
  });
}

const result = {};
try {
  if (journey === 'password-totp' || journey === 'untick') {
    await openLinkAndConfirm();
    await signInWithPasswordAndTotp();
    await consent(input.untick);
    result.consent = consentText;
  } else if (journey === 'allow-once') {
    // A step-up beyond a limit: the one operation in plain words and why it
    // is asked, allowed once on the consent page.
    await openLinkAndConfirm();
    await signInWithPasswordAndTotp();
    await expectHeading('Allow');
    await page.getByRole('heading', { level: 2, name: 'Allow this, once?' }).waitFor();
    result.text = await page.locator('main').innerText();
    for (const expected of input.expect_on_consent || []) {
      if (!result.text.includes(expected)) throw new Error(`the page lacks ${JSON.stringify(expected)}`);
    }
    await snap('allow-once');
    await page.getByRole('button', { name: 'Allow once' }).click();
    await expectHeading('Done');
    await snap('done');
    result.done = await page.locator('main').innerText();
  } else if (journey === 'step-up-mfa') {
    // Issue 30, item 7: a step-up link for a permission that needs a second
    // factor, for a person who has none yet. The second factor (here: setting
    // up an authenticator, then the recovery codes) comes before the consent
    // page, and one Approve is the whole decision.
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: input.base });
    await page.goto(input.link);
    await expectHeading('Connect your agent');
    result.device = await page.locator('main').innerText();
    result.device_brand = await page.locator('header .brand').innerText();
    await axeBoth('device');
    await snap('device-code');
    await page.getByRole('button', { name: 'Continue' }).click();
    await expectHeading('Sign in to');
    result.sign_in = await page.locator('main').innerText();
    await axeBoth('sign-in');
    await snap('sign-in');
    await page.getByLabel('Email').fill(input.email);
    await page.getByLabel('Password').fill(input.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expectHeading("Confirm it's you");
    await axeBoth('confirm');
    await snap('confirm');
    await page.getByRole('link', { name: 'Set up an authenticator app' }).click();
    await expectHeading('Set up an authenticator app');
    const key = await page.locator('main code').first().innerText();
    await axeBoth('totp-setup');
    await snap('totp-setup');
    await page.getByLabel('6-digit code from the app').fill(totp(base32ToHex(key)));
    await page.getByRole('button', { name: 'Confirm' }).click();
    await expectHeading('Your recovery codes');
    const codes = await page.locator('#recovery-codes code').allInnerTexts();
    await page.getByRole('button', { name: 'Copy the codes' }).click();
    await page.getByText('Copied.').waitFor();
    result.copied = await page.evaluate(() => navigator.clipboard.readText());
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download as a text file' }).click(),
    ]);
    result.download_name = download.suggestedFilename();
    result.downloaded = readFileSync(await download.path(), 'utf8');
    result.codes = codes;
    await axeBoth('recovery-codes');
    await snap('recovery-codes');
    await page.getByRole('link', { name: /^I saved them/ }).click();
    // The consent page, once: Approve is clicked exactly one time.
    await expectHeading('Allow');
    result.consent = await page.locator('main').innerText();
    result.code_lines = await lineCount(page.locator('.user-code'));
    result.overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await axeBoth('consent');
    await snap('consent');
    result.approve_clicks = 0;
    await page.getByRole('button', { name: 'Approve' }).click();
    result.approve_clicks += 1;
    await expectHeading('Done');
    await axeBoth('done');
    await snap('done');
    result.done = await page.locator('main').innerText();
    result.axe = axeFindings;
  } else if (journey === 'passkey') {
    await virtualAuthenticator();
    // Register a passkey on the account page (signed in with password + TOTP first).
    await page.goto(`${input.base}/account?brand=${input.brand}`);
    await signInWithPasswordAndTotp();
    await expectHeading('Connected agents');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.getByRole('button', { name: 'Remove' }).first().waitFor();
    await snap('account-with-passkey');
    await page.getByRole('button', { name: 'Sign out' }).click();
    // Now the device flow, signing in with the passkey alone.
    await openLinkAndConfirm();
    await expectHeading('Sign in to');
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await consent(input.untick);
  } else if (journey === 'revoke') {
    await page.goto(`${input.base}/account?brand=${input.brand}`);
    await signInWithPasswordAndTotp();
    await expectHeading('Connected agents');
    await snap('account');
    await page.getByRole('link', { name: 'Remove access…' }).first().click();
    await expectHeading('Remove');
    await page.getByRole('button', { name: 'Yes, remove access' }).click();
    await expectHeading('Connected agents');
    await snap('account-revoked');
    result.revoked_page = await page.textContent('main');
  } else if (journey === 'a11y') {
    // Every page a person meets, in light and dark, through axe-core; also
    // whether the page is wider than the window (long words must wrap).
    const axeSource = readFileSync(new URL('./node_modules/axe-core/axe.min.js', import.meta.url), 'utf8');
    const report = [];
    const audit = async (name) => {
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await page.evaluate(axeSource);
        const found = await page.evaluate(async () => {
          const r = await window.axe.run(document, { resultTypes: ['violations'] });
          return r.violations.map((v) => ({
            id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')),
          }));
        });
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        const lang = await page.evaluate(() => document.documentElement.lang);
        // Words broken inside (issue 30): a word of the page's text whose
        // letters sit on two lines. Addresses, emails and codes longer than a
        // narrow line may wrap where they must; words of the language may not.
        const broken = await page.evaluate(() => {
          const out = [];
          const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const el = node.parentElement;
            if (!el || el.closest('script, style, template, .visually-hidden, pre, code')) continue;
            const s = getComputedStyle(el);
            if (s.display === 'none' || s.visibility === 'hidden') continue;
            for (const word of node.textContent.matchAll(/\S+/g)) {
              if (word[0].length > 24 || /[\/@.:=]/.test(word[0])) continue;
              const range = document.createRange();
              range.setStart(node, word.index);
              range.setEnd(node, word.index + word[0].length);
              const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
              if (lines.size > 1 && out.length < 5) out.push(`"${word[0]}" in <${el.tagName.toLowerCase()}> on ${lines.size} lines`);
            }
          }
          return out;
        });
        report.push({ page: name, scheme, violations: found, overflow, lang, broken });
        await snap(`${name}-${scheme}`);
      }
      await page.emulateMedia({ colorScheme: 'light' });
    };
    await page.goto(input.link);
    await expectHeading(W.connect);
    await audit('device');
    await page.getByRole('button', { name: W.continue }).click();
    await expectHeading(W.signInTo);
    await audit('sign-in');
    await page.getByLabel(W.email).fill(input.email);
    await page.getByLabel(W.password, { exact: true }).fill('not the password');
    await page.getByRole('button', { name: W.signIn, exact: true }).click();
    await page.locator('#form-error').waitFor();
    await audit('sign-in-error');
    await page.getByLabel(W.email).fill(input.email);
    await page.getByLabel(W.password, { exact: true }).fill(input.password);
    await page.getByRole('button', { name: W.signIn, exact: true }).click();
    await expectHeading(W.oneMore);
    await audit('second-factor');
    await page.getByLabel(W.totp).fill(totp(input.totp_secret_hex));
    await page.getByRole('button', { name: W.continue, exact: true }).click();
    await expectHeading(W.allow);
    await audit('consent');
    await page.getByRole('button', { name: W.approve }).click();
    await expectHeading(W.done);
    await audit('done');
    await page.goto(`${input.base}/account?brand=${input.brand}`);
    await expectHeading(W.account);
    await audit('account');
    await page.getByRole('link', { name: W.removeAccess }).first().click();
    await expectHeading(W.removeHeading);
    await audit('revoke-confirm');
    await page.goto(`${input.base}/no-such-page`);
    await expectHeading(W.notFound);
    await audit('not-found');
    // The skip link is the first thing the keyboard reaches.
    await page.keyboard.press('Tab');
    result.first_focus = await page.evaluate(() => document.activeElement && document.activeElement.textContent);
    // "Forgot your password?" and its answer.
    await page.goto(`${input.base}/login/forgot?brand=${input.brand}`);
    await expectHeading(W.forgot);
    await audit('forgot');
    await page.getByLabel(W.email).fill(input.email);
    await page.getByRole('button', { name: W.sendLink }).click();
    await page.getByRole('status').waitFor();
    await audit('forgot-sent');
    result.report = report;
  } else if (journey === 'language-switch') {
    // With JavaScript off: the browser asks for one language (Accept-Language
    // from `locale`), the page answers in it, and the switch in the footer
    // (a plain link) changes it for this page and the next ones.
    const WE = WORDS.en;
    const WD = WORDS.de;
    await page.goto(input.link);
    await expectHeading(WD.connect);
    result.first_lang = await page.evaluate(() => document.documentElement.lang);
    await snap('device-de');
    const nav = page.getByRole('navigation', { name: 'Sprache' });
    await nav.getByRole('link', { name: 'English' }).click();
    await expectHeading(WE.connect);
    result.after_switch_lang = await page.evaluate(() => document.documentElement.lang);
    result.code_kept = await page.getByLabel('Code').inputValue();
    await snap('device-en');
    await page.getByRole('button', { name: WE.continue }).click();
    await expectHeading(WE.signInTo);
    result.next_page_lang = await page.evaluate(() => document.documentElement.lang);
    await page.getByRole('navigation', { name: 'Language' }).getByRole('link', { name: 'Deutsch' }).click();
    await expectHeading(WD.signInTo);
    result.back_lang = await page.evaluate(() => document.documentElement.lang);
    result.sign_in_heading = await page.getByRole('heading', { level: 1 }).textContent();
    await snap('sign-in-de');
    result.cookie = (await context.cookies(input.base)).find((c) => c.name === 'pactd_lang') || null;
  } else if (journey === 'who-is-asking') {
    // Who is asking (issue 9, item 8): every request the page makes stays on
    // pactd's origin (the platform's logo is served by pactd, never
    // hot-linked), the logo is really shown, the brand accent colours the
    // buttons, and "Not you?" signs out and returns to the same request.
    const elsewhere = [];
    page.on('request', (r) => { if (!r.url().startsWith(input.base)) elsewhere.push(r.url()); });
    await openLinkAndConfirm();
    await signInWithPasswordAndTotp();
    await expectHeading('Allow');
    const logo = page.locator('img.agent-logo');
    await logo.waitFor();
    result.logo_width = await logo.evaluate((img) => img.complete ? img.naturalWidth : 0);
    result.logo_src = await logo.getAttribute('src');
    result.brand_logo_width = await page.locator('img.brand-logo').evaluate((img) => img.complete ? img.naturalWidth : 0);
    result.approve_background = await page.getByRole('button', { name: 'Approve' })
      .evaluate((b) => getComputedStyle(b).backgroundColor);
    result.links = await page.locator('.agent-links a').evaluateAll((as) => as.map((a) => ({
      text: a.textContent, href: a.getAttribute('href'), rel: a.getAttribute('rel') })));
    await snap('consent');
    await page.emulateMedia({ colorScheme: 'dark' });
    await snap('consent-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.getByRole('button', { name: 'Not you? Sign out' }).click();
    await expectHeading('Sign in to');
    await snap('not-you-sign-in');
    await page.getByLabel('Email').fill(input.other_email);
    await page.getByLabel('Password').fill(input.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expectHeading('Allow');
    result.consent_after = await page.textContent('main');
    await page.getByRole('button', { name: 'Approve' }).click();
    await expectHeading('Done');
    result.elsewhere = elsewhere;
  } else if (journey === 'oidc') {
    // Sign-in at the brand's OpenID provider (tests/oidc/provider.mjs): out
    // to the provider's form on another site, back through pactd's
    // callback, then consent as usual.
    await openLinkAndConfirm();
    await expectHeading('Sign in to');
    await snap('oidc-leave');
    await page.getByRole('link', { name: /^Sign in at / }).click();
    await page.getByLabel('User').fill(input.login);
    await page.getByLabel('Password', { exact: true }).fill(input.password);
    await snap('oidc-provider-login');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await consent(input.untick);
    result.url = page.url();
  } else if (journey === 'login-csrf') {
    // The victim enters their own code and reaches the brand-login hand-off.
    await openLinkAndConfirm();
    await expectHeading('Sign in to');
    await snap('brand-login-link');
    const session = async () =>
      ((await context.cookies(input.base)).find((c) => c.name === 'pactd_session') || {}).value;
    const before = await session();
    // Another site auto-submits the attacker's genuine assertion (an opaque
    // origin: cross-site to pactd).
    await page.goto('about:blank');
    await page.setContent(`<form id="f" method="post" action="${input.base}/device/assertion">
      <input type="hidden" name="assertion" value="${input.planted}"></form>
      <script>document.getElementById('f').submit()</script>`);
    await page.waitForURL(`${input.base}/device/assertion`);
    await expectHeading('Sign-in not accepted');
    await snap('refused');
    result.text = await page.locator('main').innerText();
    result.same_session = before !== undefined && before === (await session());
  } else {
    throw new Error(`unknown journey ${journey}`);
  }
  console.log(JSON.stringify({ ok: true, ...result }));
} catch (e) {
  await snap('failure').catch(() => {});
  console.error(`journey ${journey} failed on ${page.url()}: ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}

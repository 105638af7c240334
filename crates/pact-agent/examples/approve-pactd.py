#!/usr/bin/env python3
"""Decide one PACT device authorization on pactd's own pages, for
`pact-agent conformance --approve command -- python3 approve-pactd.py`.

The conformance runner starts this program once per decision, with the
request in the environment, and waits for it to exit:

  PACT_VERIFICATION_URI, PACT_VERIFICATION_URI_COMPLETE  the link (RFC 8628 §3.2)
  PACT_USER_CODE                                         the code the page must show
  PACT_DECISION                                          approve | deny
  PACT_APPROVE_SCOPES                                    scopes to leave ticked (space-separated)
  PACT_DENY_SCOPES, PACT_REQUESTED_SCOPES                scopes to untick, scopes requested
  PACT_ACCOUNT                                           primary | secondary (another account)
  PACT_BRAND, PACT_BRAND_NAME, PACT_PURPOSE              for messages

It does what a person with a browser does: open the link, confirm the
code, sign in (email and password, then an authenticator code when asked),
check the consent page names this code, tick exactly the scopes asked,
press Approve or Deny, and expect the "done" page. Exit 0 when decided,
3 when it cannot decide this request (no second account configured), 1
on any other failure, with the step and the page's words on stderr.

Its own configuration, from the environment (secrets are never printed):

  APPROVE_EMAIL, APPROVE_PASSWORD                 the primary account
  APPROVE_TOTP_SECRET                             its authenticator secret, base32 (when it has one)
  APPROVE_SECOND_EMAIL, APPROVE_SECOND_PASSWORD,  the secondary account (optional)
  APPROVE_SECOND_TOTP_SECRET
  APPROVE_COOKIES                                 a directory keeping each account's session between
                                                  runs, as a browser would (optional)

Only the Python standard library is needed. Another provider's pages need
their own script: the environment above is the same for every provider.
"""

import base64
import hashlib
import hmac
import html.parser
import http.cookiejar
import os
import struct
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

MAX_STEPS = 12


class Failure(Exception):
    pass


class Form:
    def __init__(self, action):
        self.action = action
        self.inputs = []  # (name, type, value, checked)

    def has(self, name):
        return any(i[0] == name for i in self.inputs)

    def hidden(self):
        return [(n, v) for (n, t, v, _) in self.inputs if t == "hidden"]

    def checkboxes(self, name):
        return [(v, c) for (n, t, v, c) in self.inputs if n == name and t == "checkbox"]


class Page(html.parser.HTMLParser):
    """The forms of a page and its visible text."""

    def __init__(self, body):
        super().__init__(convert_charrefs=True)
        self.forms, self.text, self.alert, self._skip, self._in_alert = [], [], [], 0, 0
        self.feed(body)

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "form":
            self.forms.append(Form(a.get("action", "")))
        elif tag == "input" and self.forms:
            self.forms[-1].inputs.append(
                (a.get("name", ""), a.get("type", "text").lower(), a.get("value", ""), "checked" in a))
        if a.get("role") == "alert":
            self._in_alert += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.text.append(data.strip())
            if self._in_alert:
                self.alert.append(data.strip())

    def words(self):
        return " ".join(self.text)

    def message(self):
        said = " ".join(self.alert) or self.words()
        return said[:300]


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Browser:
    def __init__(self, cookie_file):
        self.jar = http.cookiejar.LWPCookieJar(cookie_file) if cookie_file else http.cookiejar.CookieJar()
        if cookie_file and os.path.exists(cookie_file):
            self.jar.load(ignore_discard=True)
        self.cookie_file = cookie_file
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirects())

    def save(self):
        if self.cookie_file:
            self.jar.save(ignore_discard=True)
            os.chmod(self.cookie_file, 0o600)

    def fetch(self, step, url, fields=None, origin=None):
        data = urllib.parse.urlencode(fields).encode() if fields is not None else None
        req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
        req.add_header("User-Agent", "approve-pactd.py (pact-agent conformance example)")
        if origin:
            req.add_header("Origin", origin)
        try:
            res = self.opener.open(req, timeout=30)
        except urllib.error.HTTPError as e:
            res = e
        except OSError as e:
            raise Failure(f"{step}: request failed: {e}")
        body = res.read().decode("utf-8", "replace")
        location = res.headers.get("Location")
        return res.status, urllib.parse.urljoin(url, location) if location else None, body


def totp(secret_b32, at):
    """RFC 6238: HMAC-SHA1, 30 s steps, 6 digits."""
    key = base64.b32decode(secret_b32.upper().replace(" ", "") + "=" * (-len(secret_b32.replace(" ", "")) % 8))
    mac = hmac.new(key, struct.pack(">Q", int(at) // 30), hashlib.sha1).digest()
    o = mac[-1] & 0x0F
    return "%06d" % ((struct.unpack(">I", mac[o:o + 4])[0] & 0x7FFFFFFF) % 1_000_000)


def form_with(page, step, *names):
    for f in page.forms:
        if all(f.has(n) for n in names):
            return f
    raise Failure(f"{step}: the page shows no form with {', '.join(names)}: {page.message()!r}")


def normalised(code):
    return "".join(c for c in code.upper() if c.isalnum())


def decide(env, account):
    link = env.get("PACT_VERIFICATION_URI_COMPLETE") or env["PACT_VERIFICATION_URI"]
    user_code = env["PACT_USER_CODE"]
    approve = env["PACT_DECISION"] == "approve"
    wanted = env.get("PACT_APPROVE_SCOPES", "").split()
    parts = urllib.parse.urlsplit(link)
    origin = f"{parts.scheme}://{parts.netloc}"
    cookies = None
    if env.get("APPROVE_COOKIES"):
        os.makedirs(env["APPROVE_COOKIES"], mode=0o700, exist_ok=True)
        name = hashlib.sha256(f"{origin} {account['email']}".encode()).hexdigest()[:16]
        cookies = os.path.join(env["APPROVE_COOKIES"], name + ".txt")
    b = Browser(cookies)

    # The link: the code-entry form, pre-filled; confirm the code.
    status, _, body = b.fetch("open the link", link)
    if status != 200:
        raise Failure(f"open the link: HTTP {status}: {Page(body).message()!r}")
    page = Page(body)
    form = form_with(page, "open the link", "user_code")
    fields = form.hidden() + [("user_code", user_code)]
    status, nxt, body = b.fetch("enter the code", urllib.parse.urljoin(link, form.action), fields, origin)
    if status != 303 or not nxt:
        raise Failure(f"enter the code: HTTP {status}: {Page(body).message()!r}")

    consent_posts = 0
    for _ in range(MAX_STEPS):
        path = urllib.parse.urlsplit(nxt).path
        status, to, body = b.fetch(f"open {path}", nxt)
        if status == 303 and to:
            nxt = to
            continue
        if status != 200:
            raise Failure(f"open {path}: HTTP {status}: {Page(body).message()!r}")
        page = Page(body)
        if path == "/login":
            form = form_with(page, "sign in", "email", "password")
            fields = form.hidden() + [("email", account["email"]), ("password", account["password"])]
            status, nxt, body = b.fetch("sign in", urllib.parse.urljoin(nxt, form.action), fields, origin)
            if status != 303:
                raise Failure(f"sign in: HTTP {status}: {Page(body).message()!r}")
        elif path == "/login/second-factor":
            if not account.get("totp"):
                raise Failure(f"pactd asks {account['email']} for an authenticator code: set its TOTP secret")
            for attempt in (0, 1):
                form = form_with(page, "second factor", "code")
                fields = form.hidden() + [("code", totp(account["totp"], time.time()))]
                status, to, body = b.fetch("enter the authenticator code",
                                           urllib.parse.urljoin(nxt, form.action), fields, origin)
                if status == 303:
                    nxt = to
                    break
                page = Page(body)
                if attempt == 0 and status == 400 and "already used" in page.words():
                    # Each code works once (RFC 6238 §5.2): wait for the next step.
                    time.sleep(31 - time.time() % 30)
                    continue
                raise Failure(f"enter the authenticator code: HTTP {status}: {page.message()!r}")
        elif path == "/device/consent":
            consent_posts += 1
            if consent_posts > 2:
                raise Failure("pactd keeps sending the browser back to the consent page")
            words = page.words()
            at = words.find("with code ")
            shown = words[at + len("with code "):].split(" ")[0].rstrip(".") if at >= 0 else ""
            if normalised(shown) != normalised(user_code):
                raise Failure(f"the consent page is for code {shown or '(none shown)'}, not {user_code}")
            form = next((f for f in page.forms if f.checkboxes("scope")), None)
            if form is None:
                raise Failure(f"the consent page shows no scopes: {page.message()!r}")
            offered = [v for v, _ in form.checkboxes("scope")]
            if approve:
                ticked = wanted or [v for v, c in form.checkboxes("scope") if c]
                missing = [s for s in ticked if s not in offered]
                if missing:
                    raise Failure(f"the page does not offer {missing} (it offers {offered})")
            else:
                ticked = []
            fields = form.hidden() + [("scope", s) for s in ticked]
            fields.append(("action", "approve" if approve else "deny"))
            status, nxt, body = b.fetch("approve" if approve else "deny",
                                        urllib.parse.urljoin(nxt, form.action), fields, origin)
            if status != 303:
                raise Failure(f"{'approve' if approve else 'deny'}: HTTP {status}: {Page(body).message()!r}")
        elif path == "/device/done":
            said = "You allowed" if approve else "You declined"
            if said not in page.words():
                raise Failure(f"the done page does not say {said!r}: {page.message()!r}")
            b.save()
            return
        else:
            raise Failure(f"unexpected page {path}: {page.message()!r}")
    raise Failure(f"more than {MAX_STEPS} redirects")


def main():
    env = os.environ
    prefix = "APPROVE_SECOND_" if env.get("PACT_ACCOUNT") == "secondary" else "APPROVE_"
    email = env.get(prefix + "EMAIL")
    if not email:
        print(f"no {env.get('PACT_ACCOUNT', 'primary')} account: set {prefix}EMAIL and {prefix}PASSWORD",
              file=sys.stderr)
        return 3
    account = {"email": email, "password": env.get(prefix + "PASSWORD", ""),
               "totp": env.get(prefix + "TOTP_SECRET")}
    try:
        decide(env, account)
    except Failure as e:
        print(f"approve-pactd.py as {email}: {e}", file=sys.stderr)
        return 1
    print(f"decided ({env['PACT_DECISION']}) as {email}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

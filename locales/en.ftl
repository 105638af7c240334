# pactd's pages for the person, in English.
#
# Every key here is used by a template (templates/*.html) or by the page code
# (crates/pact-server/src/web/), and locales/de.ftl has the same keys: the test
# `every_key_is_translated_and_used` checks both ways. Names of brands, agents
# and scopes are arguments ({ $brand }), never translated.

## Every page (base.html)
base-skip = Skip to content
base-nav-account = Connected agents
base-footer = Secured by pactd · PACT 1.0
base-language = Language

## Code entry (device.html)
device-title = Enter your code
device-heading = Connect your agent
device-agent-asks = { $agent } asks to act for you at { $brand }.
device-enter = Enter the code your agent shows you.
device-check = Check that this code is the one your agent shows you right now, then continue. If you did not just ask an agent to connect, close this page.
device-code = Code
device-continue = Continue

## Consent (consent.html)
consent-title = Allow { $agent }?
consent-heading = Allow { $agent } to act for you at { $brand }?
consent-from = from { $origin }
consent-unverified-agent = { $brand } has not verified this agent. It let the agent in because the agent proved who it is, but nobody at { $brand } has checked who runs it. Allow only what you would allow any stranger's app.
consent-new-tab = (opens in a new tab)
consent-asked = Asked { $ago } ({ $at }) from { $ip }, with code { $code }.
consent-signed-in-as = You are signed in to { $brand } as { $user }.
consent-not-you = Not you? Sign out
consent-only-if = Only approve if you asked this agent to connect just now. If you did not, choose Deny.
consent-already = You already allowed this agent to:
consent-asked-by-agent = Asked { $ago } ({ $at }) by the agent itself, while it was working for you at { $brand }, with code { $code }.
consent-only-if-more = Approve only if you want { $agent } to do this as well. What it may already do stays as it is, whichever you choose.
consent-asks-more = It now also asks to
consent-still-needs = It still needs your answer for this request.
consent-asks-to = It asks to
consent-needs-mfa = (needs a second factor)
consent-untick = Untick anything you don't want to allow.
consent-conditions = Only under these conditions
consent-approve = Approve
consent-deny = Deny
consent-homepage = Website
consent-privacy = Privacy policy
consent-terms = Terms of service

## Done (device_done.html)
done-title = Done
done-heading = Done — go back to your agent
done-allowed = You allowed { $agent } to act for you at { $brand }.
done-it-may = It may:
done-close = You can close this page and return to your agent. You can see and revoke what you allowed at any time under
done-account-link = Connected agents
done-declined = You declined. { $agent } was not given access to your { $brand } account.
done-close-only = You can close this page.

## A brand's own login (device_external_login.html)
ext-title = Sign in to { $brand }
ext-asks = { $agent } asks to act for you at { $brand } (code { $code }). Sign in with your { $brand } account first; you will come back here to decide.
ext-go = Sign in at { $brand }

## Error pages (error.html)
error-enter-code = Enter a code

## Sign-in (login.html)
login-title = Sign in
login-heading = Sign in to { $brand }
login-agent-asks = { $agent } asks to act for you at { $brand }. Sign in to see what it asks, and to decide.
login-email = Email
login-password = Password
login-submit = Sign in
login-forgot = Forgot your password?
login-check-name = You are signing in to { $brand }. Check the name before you enter your password.

## Passkeys at sign-in (passkey_signin.html)
passkey-signin-heading = Or use a passkey
passkey-signin-text = Sign in with your device's screen lock or security key — no password or code needed.
passkey-signin-button = Sign in with a passkey

## What static/webauthn.js says (passkey_messages.html)
passkey-js-failed = Something went wrong. Please try again.
passkey-js-cancelled = The passkey request was cancelled or timed out. You can try again.
passkey-js-exists = This device already has a passkey for your account.
passkey-js-insecure = Passkeys cannot be used on this address.
passkey-js-error = Something went wrong with the passkey. Please try again.
passkey-js-create-prompt = Follow your browser's prompt to create the passkey…
passkey-js-none-created = No passkey was created.
passkey-js-added = Passkey added.
passkey-js-use-prompt = Follow your browser's prompt to use your passkey…
passkey-js-none-chosen = No passkey was chosen.
passkey-js-signed-in = Signed in.

## Forgot password (forgot_password.html)
forgot-title = Forgot your password
forgot-heading = Forgot your password?
forgot-sent = If an account at { $brand } has that email, we have sent it a link to choose a new password. The link works for 30 minutes, once.
forgot-no-mail = No mail after a few minutes? Check your spam folder, or ask again.
forgot-back = Back to sign-in
forgot-intro = Enter the email of your { $brand } account. We will send it a link to choose a new password.
forgot-send = Send the link

## New password (reset_password.html)
reset-title = Choose a new password
reset-done-heading = Your password is changed
reset-done = Every browser that was signed in to your { $brand } account is now signed out. Sign in with your new password; your second factor, if you have one, is asked as before.
reset-done-agents = Agents you connected keep the access you gave them. You can see and end it on your account page.
reset-sign-in = Sign in
reset-intro = For your { $brand } account. Use at least { $n } characters; a password you use nowhere else.
reset-new = New password
reset-again = New password, again
reset-submit = Set the new password

## Second factor (second_factor.html)
mfa-title = Second step
mfa-reconfirm-heading = Confirm it's you
mfa-reconfirm-text = This needs a second factor from the last few minutes.
mfa-back-link = Go back to the request
mfa-back-text = without the permission that needs a second factor (it is shown unticked; you can decide on the rest).
mfa-heading = One more step
mfa-text = Your password is right. Now confirm with your second factor.
mfa-code = 6-digit code from your authenticator app
mfa-continue = Continue
mfa-use-recovery = Use a recovery code instead
mfa-recovery-code = Recovery code
mfa-recovery-once = Each recovery code works once.
mfa-recovery-submit = Use recovery code
mfa-no-app = Your account has no authenticator app yet. Set one up to continue.
mfa-set-up = Set up an authenticator app

## A recovery code was used (recovery_used.html)
used-title = Recovery code used
used-heading = You used a recovery code
used-last = That was your last recovery code. Get new ones on your account page before you need one again.
used-left = It cannot be used again. You have { $n ->
    [one] { $n } recovery code
   *[other] { $n } recovery codes
  } left.
used-not-you = If you did not use it yourself, someone may have your codes: get new ones and change your password.
used-continue = Continue
used-account = Account and security

## Recovery codes (recovery_codes.html)
codes-title = Recovery codes
codes-enrolled = Your authenticator app is set up.
codes-heading = Your recovery codes
codes-intro = If you lose your phone, each of these codes lets you sign in once. Save them somewhere safe now:
codes-once = they are shown only this time.
codes-old = Any older recovery codes no longer work.
codes-copy = Copy the codes
codes-copied = Copied. Paste them somewhere safe.
codes-copy-failed = Copying did not work here. Download them instead, or write them down.
codes-download = Download as a text file
codes-file-heading = Recovery codes for { $email } at { $brand }. Each works once.
codes-saved = I saved them — continue

## Authenticator app (totp_setup.html)
totp-title = Authenticator app
totp-replace-heading = Replace your authenticator app
totp-replace-notice = When you confirm, your old authenticator's codes and your old recovery codes stop working.
totp-heading = Set up an authenticator app
totp-required = { $brand } asks every account for a second factor. Set it up once to finish signing in.
totp-step-open = Open an authenticator app on your phone and add an account.
totp-step-scan = Scan this QR code, or type in the key below.
totp-step-enter = Enter the 6-digit code the app shows.
totp-same-device = On this device? Open it in your authenticator app
totp-account = Account:
totp-key = Key:
totp-code = 6-digit code from the app
totp-confirm = Confirm
totp-codes-heading = Recovery codes
totp-codes-text = Lost your recovery codes? Get a new set; the old ones stop working.
totp-codes-new = New recovery codes

## Remove an agent's access (revoke_confirm.html)
revoke-title = Remove access
revoke-heading = Remove { $agent }'s access?
revoke-text = { $agent } will no longer be able to act for you at { $brand }. It can no longer:
revoke-at-once = This takes effect at once. To let it act for you again later, you approve it again.
revoke-confirm = Yes, remove access
revoke-keep = Keep it

## Delete the account (account_delete.html)
del-title = Delete your account
del-heading = Delete your { $brand } account?
del-cannot-undo = This cannot be undone. At once, on every server:
del-grants-end = every agent connected to your account loses its access ({ $n } connected now);
del-erased = your email address, password, authenticator app, passkeys, recovery codes and sign-ins are erased.
del-receipts-kept = The signed receipts of what agents did for you are kept, as { $brand }'s record of those actions. They name only an opaque account number, not your email.
del-password = Your password, to confirm it is you
del-confirm = Delete my account
del-keep = Keep it

## Connected agents (account.html)
acc-title = Connected agents
acc-signed-in = You are signed in to { $brand }.
acc-signed-in-as = You are signed in to { $brand } as { $email }.
acc-agents-heading = Agents that can act for you
acc-no-agents = No agent can act for you at { $brand } now.
acc-active-until = Active — can act for you until { $until }
acc-unverified-agent = { $brand } has not verified this agent: it was let in because it proved who it is, but nobody at { $brand } has checked who runs it.
acc-may-do = What it may do:
acc-limits = Only within these limits:
acc-connected-used = Connected { $connected } · Last used { $used }
acc-remove-access = Remove access…
acc-past-heading = Access that has ended
acc-it-could = It could:
acc-activity-heading = Recent activity
acc-no-activity = No agent has done anything for you yet.
acc-replied-only = Replied without using any of your data.
acc-using = Using:
acc-security-heading = Sign-in and security
acc-passkeys = Passkeys
acc-no-passkeys = You have no passkeys yet. A passkey lets you sign in with your device's screen lock instead of a password and code.
acc-passkey-dates = Added { $added } · Last used { $used }
acc-passkey-remove = Remove
acc-passkey-reconfirm = To add or remove passkeys, first confirm it's you:
acc-passkey-reconfirm-code = enter a code from your authenticator app
acc-passkey-reconfirm-or = , or
acc-passkey-reconfirm-passkey = sign out and sign in again with a passkey.
acc-passkey-name = Name for the new passkey (optional)
acc-passkey-name-example = For example: My laptop
acc-passkey-add = Add a passkey
acc-passkey-unsupported = This browser cannot create passkeys.
acc-passkeys-need-name = Passkeys cannot be used on this site yet: it is reached by an IP address, and passkeys need a site name (such as localhost or shop.example). The people who run this site can turn them on by giving it a name.
acc-browsers-heading = Where you are signed in
acc-this-browser = This browser
acc-other-browser = Another browser
acc-browser-dates = Signed in { $since } · Last seen { $seen }
acc-sign-out-others = Sign out everywhere else
acc-totp-heading = Authenticator app
acc-totp-on = An authenticator app is set up for your account.
acc-totp-reset = Reset authenticator app
acc-totp-off = No authenticator app is set up.
acc-totp-set-up = Set up an authenticator app
acc-recovery-heading = Recovery codes
acc-recovery-left = You have { $n ->
    [one] { $n } unused recovery code
   *[other] { $n } unused recovery codes
  }.
acc-recovery-new = Get new recovery codes
acc-recovery-replace = New codes replace all your old ones.
acc-delete-heading = Delete your account
acc-delete-text = Ends every agent's access and erases your email, sign-in methods and sessions.
acc-delete-link = Delete my account…
acc-sign-out = Sign out

## Sign-in messages (web/login.rs)
login-signed-out = You are signed out.
login-err-credentials = That email and password don't match an account here. Check both and try again.
login-err-empty = Enter your email and your password.
login-err-which-service = We don't know which service you want to sign in to. Open the link from your agent (or from the service's website) again.
login-err-unknown-service = We don't know this service. Check the link and try again.
mfa-err-empty = Enter a code.
mfa-err-wrong = That code didn't work. Check it and try again.
mfa-err-replayed = That code was already used. Wait for the next code in your app and enter it.
mfa-err-external = You signed in through the service's own login, which handles second factors itself.

## Waiting after too many attempts (web/login.rs)
wait-too-many-attempts = Too many attempts.
wait-too-many-sign-ins = Too many sign-in attempts from your network.
wait-too-many-codes = Too many code attempts.
wait-too-many-requests = Too many requests from your network.
wait-seconds = { $what } Please wait { $n ->
    [one] { $n } second
   *[other] { $n } seconds
  } and try again.
wait-minutes = { $what } Please wait { $n ->
    [one] { $n } minute
   *[other] { $n } minutes
  } and try again.

## Authenticator app messages (web/mfa.rs)
totp-err-external = You signed in through the service's own login, which manages your second factors.
totp-err-expired = This setup page has expired. Open it again and scan the new QR code.
totp-err-empty = Enter the 6-digit code your app shows.
totp-err-wrong = That code didn't work. Check that your phone's clock is right and try the next code.

## Deleting the account (web/account_delete.rs)
del-err-external = Your account is kept by the brand's own sign-in, not here: delete it there. You can remove each agent's access on the Connected agents page.
del-err-signed-out = Sign in to manage your account.
del-err-password = That password is not right. Nothing was deleted.
del-err-reconfirm = Verify your second factor again first (sign out and in), then delete. Nothing was deleted.
del-done-title = Your account was deleted
del-done = Every agent's access has ended, and your email, sign-in methods and sessions are erased.

## Error pages (web/page.rs)
err-render = Something went wrong. Please try again.
err-unacceptable = Something in what you sent cannot be accepted. Check it and try again.
err-bad-request = That didn't work
err-forbidden = Request refused
err-not-found = Not found
err-too-many = Please wait a moment
err-unavailable-title = Please try again in a moment
err-unavailable = We cannot reach our records right now. Nothing was changed. Please try again in a moment.
err-timed-out = This took longer than it should. Please try again in a moment.
err-internal-title = Something went wrong
err-internal = Something went wrong on our side. Please try again in a moment.
err-no-such-page = There is no page at this address. If you followed a link from your agent, open it again or ask your agent for a new one.
err-no-such-language = There is no such language here.

## Code entry and consent messages (web/device.rs)
device-expired-title = This code has expired
device-expired = Codes are valid for a few minutes only. Ask your agent for a new code and enter it here.
device-used-title = This code has already been used
device-used = This request has already been answered, so there is nothing more to do with this code. If your agent still needs your permission, ask it for a new code.
device-err-too-many = Too many codes were tried. Wait { $n ->
    [one] { $n } second
   *[other] { $n } seconds
  }, then enter the code your agent shows.
device-err-malformed = That is not a code from an agent. Codes are 8 letters, like BCDF-GHJK.
device-err-unknown = We don't know that code. Check it against the one your agent shows, or ask it for a new one.
device-err-no-brand = This brand no longer exists.
consent-unregistered-agent = An unregistered agent
consent-err-not-requested = Only the permissions this agent asked for can be allowed. Nothing was changed.
consent-err-gone = This request no longer exists. Ask your agent for a new code.
consent-err-decided = This request can no longer be answered: it has expired or was already answered.
consent-err-other-request = This page was for another request: a different code was entered since, perhaps in another tab. Nothing was approved. Review the request now shown and decide again.
consent-err-other-request-not-you = This page was for another request: a different code was entered since, perhaps in another tab. Review the request now shown.
consent-err-no-action = Choose Approve or Deny.
consent-err-none-ticked = Tick at least one permission to approve, or choose Deny.
consent-err-mfa-brand-login = One of these permissions needs a second factor. Sign in again, with your second factor, to approve it — or untick it.
consent-err-mfa = One of these permissions needs a second factor. Untick it, or sign in again with a second factor.
consent-detail-unknown-type = Restriction of type { $type }
consent-detail-undescribed = Limited by { $type }
consent-op-heading = Allow this, once?
consent-op-why = Why you are asked: { $why }.
consent-op-once = Approving allows exactly this, one time. Anything else still needs your permission.
consent-op-approve = Allow once
consent-narrow = You can allow less:
consent-narrow-amount = { $label } (at most { $max }):
consent-narrow-count = { $label } (at most { $max }):
consent-err-keep-one = Keep at least one item ticked for { $label }, or choose Deny.
consent-err-amount = Enter an amount for { $label }, like 12.50.
consent-err-count = Enter a whole number for { $label }.
consent-err-narrow-only = You can only allow less than the agent asked for, not more. Nothing was approved.
consent-err-operation-gone = This request was made under access that is not yours or has ended. Nothing was approved.
consent-err-other-account = This request is for another account: the one your agent acts for. Nothing was shown or approved. Sign out, then sign in with that account and enter the code again.
consent-err-agent-off = The store has turned off this agent's access since it asked. Nothing was approved.
done-your-agent = your agent
ago-now = just now
ago-minutes = { $n ->
    [one] { $n } minute ago
   *[other] { $n } minutes ago
  }
ago-hours = { $n ->
    [one] { $n } hour ago
   *[other] { $n } hours ago
  }
ago-days = { $n ->
    [one] { $n } day ago
   *[other] { $n } days ago
  }

## A brand's own login, messages (web/brand_login.rs)
ext-an-agent = An agent
ext-err-title = Sign-in not accepted
ext-err-malformed = The sign-in did not come back in a form we understand. Start again from the code your agent showed you.
ext-err-invalid = We could not confirm this sign-in, so nothing was changed. Start again from the code your agent showed you.
ext-err-not-this-browser = This sign-in was not started in this browser, so nothing was changed and you were not signed in. If you were entering a code from your own agent, enter it again here and sign in from the page that follows.
err-cross-site = This request came from another site and was refused.
err-unverified = This request could not be verified and was refused.
err-session-changed = Your session has changed. Go back, reload the page and try again.

## Forgot password, messages and the mail (web/password_reset.rs)
forgot-err-not-offered = Resetting a password by email is not set up here. Ask the store's customer service to help you get back into your account.
forgot-err-email = Enter the email address of your account.
reset-err-dead-link = This link has expired or was already used. Ask for a new one below.
reset-err-mismatch = The two passwords are not the same. Type the new password twice.
reset-err-short = Choose a password of at least { $n } characters.
mail-reset-subject = Reset your password at { $brand }
mail-reset-asked = Someone asked to reset the password of your { $brand } account.
mail-reset-open = To choose a new password, open this link within { $n } minutes:
mail-reset-once = The link works once. Your second factor, if you have one, is still asked when you sign in.
mail-reset-ignore = If you did not ask for this, ignore this message: your password stays as it is.

## Connected agents, messages (web/account.rs)
acc-done-revoked = Access removed. That agent can no longer act for you.
acc-done-passkey-added = Passkey added. You can now sign in with it.
acc-done-passkey-removed = Passkey removed.
acc-done-signed-out-others = You are signed out everywhere else.
acc-err-no-store = There is no such store here.
acc-err-which-store = Open this page from the link on your store's website, so we know where to sign you in.
acc-err-sessions-signed-out = Sign in with your account to manage where you are signed in.
acc-err-signed-out = Sign in to manage your connected agents.
acc-err-no-grant = There is no such connection on your account.
acc-never = never
ended-expired = Expired on { $when }.
ended-by-you = You removed its access on { $when }.
ended-account-deleted = Your account was deleted on { $when }.
ended-by-agent = The agent gave up its access on { $when }.
ended-token-reuse = Stopped automatically on { $when }: a token of this agent was used twice, which can mean it was stolen.
ended-superseded = Replaced on { $when } when you allowed this agent more.
ended-by-staff = { $brand }'s staff removed its access on { $when }.
ended-by-staff-reason = { $brand }'s staff removed its access on { $when }. Reason given: { $reason }
ended-other = Access ended on { $when } ({ $reason }).
ended-plain = Access ended on { $when }.
status-revoked = Revoked on { $when }
status-expired = Expired on { $when }
status-active = Active
action-list-orders = Looked at your orders
action-order-status = Checked the status of an order
action-cancel-order = Cancelled an order
action-other = Used “{ $tool }”
action-approved-once = (you allowed it once)
action-no-reason = no reason given
action-failed = { $action } — the shop did not do it: { $why }
action-unknown = { $action } — no answer in time; it may or may not have happened
action-beyond-effect = { $action } — the shop reports { $effect }, more than you allowed
action-refused = Not done: { $action } — { $why }
refused-beyond = it goes beyond what you allowed, so you were asked
refused-scope = it needed your permission
refused-other = it was not allowed

## Passkeys, messages (web/passkeys.rs)
pk-err-unavailable = Passkeys are not available on this site.
pk-err-db = We cannot reach our records right now. Please try again in a moment.
pk-err-session = Your session has expired. Reload the page and try again.
pk-err-signed-out = Sign in with your account to manage passkeys.
pk-err-too-many = You have as many passkeys as an account can have. Remove one first.
pk-err-name = Give the passkey a shorter name (up to 64 characters).
pk-err-answer = The passkey answer was not understood.
pk-err-ceremony = This passkey request has expired or was already used. Please try again.
pk-err-verify = The passkey could not be verified. Please try again.
pk-err-duplicate = This passkey is already registered.
pk-err-too-many-attempts = Too many sign-in attempts. Please wait a moment and try again.
pk-err-no-brand = Open the sign-in page from your store's site.
pk-err-unknown-brand = Unknown brand.
pk-err-unknown-passkey = This passkey was not recognised. Use another passkey or sign in with your password.
pk-err-login-ceremony = This sign-in request has expired or was already used. Please try again.
pk-err-no-such = There is no such passkey.
pk-err-reconfirm = To change your passkeys, first confirm it's you: verify your authenticator app code again, or sign out and sign in with a passkey.
mfa-err-sign-in-again = To add a first way to confirm it's you, your sign-in must be recent: sign out, sign in again with your password, then add it within 10 minutes.

## Sign-in at the brand's OpenID provider (oidc_no_mfa.html)
oidc-nomfa-title = No second factor from { $brand }
oidc-nomfa-heading = Your sign-in did not include a second factor
oidc-nomfa-body = You are signed in to { $brand }, but its sign-in service did not confirm a second factor (such as a code from an app or a security key), even though we asked for one. Permissions that need a second factor cannot be approved in this sign-in.
oidc-nomfa-next = Go back to the request and untick them, or set up a second factor with { $brand } and sign in again.
oidc-nomfa-back = Back to the request

## Sign-in at the brand's OpenID provider, messages (web/oidc_login.rs)
oidc-step-up-notice = One of these permissions needs a second factor. Sign in again, with your second factor, to approve it — or go back and untick it.
oidc-err-unavailable-title = Sign-in is unavailable
oidc-err-unreachable = We could not reach this shop's sign-in service, so nothing was changed. Please try again in a few minutes.
oidc-err-provider = We could not complete the sign-in with this shop's sign-in service, so nothing was changed. Please try again in a few minutes.
oidc-err-not-accepted-title = Sign-in not accepted
oidc-err-malformed = The sign-in did not come back in a form we understand, so nothing was changed. Start again from the code your agent showed you.
oidc-err-unknown = This sign-in was already used, has expired, or was never started here, so nothing was changed. Start again from the code your agent showed you.
oidc-err-not-this-browser = This sign-in was not started in this browser, so nothing was changed and you were not signed in. If you were entering a code from your own agent, enter it again here and sign in from the page that follows.
oidc-err-stale-title = This request can no longer be answered
oidc-err-stale = The request this sign-in was for has expired, was already answered, or another code was entered since. Nothing was changed. Ask your agent for a new code if it still needs your permission.
oidc-err-invalid = We could not confirm this sign-in, so nothing was changed and you were not signed in. Start again from the code your agent showed you.
oidc-err-provider-said-title = Sign-in not completed
oidc-err-provider-said = The sign-in service ended the sign-in without signing you in (it said: { $code }). Nothing was changed. Start again from the code your agent showed you.


## Limits in plain words (web/limit_words.rs)
limit-range = { $from } to { $to }
limit-equals = { $label }: only { $value }
limit-one-of = { $label }: only { $value }
limit-at-most = { $label }: at most { $value }
limit-none = no { $label }
limit-total = { $label }: at most { $value } in total
limit-window = { $label }: only { $value }
limit-calls = { $label }: at most { $n }
limit-used-calls = { $used } of { $cap } { $label } used
limit-used-amount = { $label }: { $used } of { $cap } used
limit-beyond-value = this goes beyond what you allowed ({ $limit })
limit-beyond-used-up = what you allowed is used up ({ $limit })
limit-beyond-not-covered = this action was not part of what you allowed
limit-unreadable = Limits that cannot be read: every limited action is refused until you approve again.
limit-once-open = Allowed once: “{ $tool }” (not used yet)
limit-once-used = Allowed once: “{ $tool }” (used)
home-title = PACT authorization server
home-heading = This is a PACT authorization server
home-what = Personal AI agents talk to the brands hosted here over A2A, and act on a person's account only with the permission that person gives on this server.
home-card = Each brand's Agent Card, for agents:
home-device = Enter a code your agent gave you
home-admin = Staff console
home-no-brand = No brand is set up yet. Add one on the server with

# Die Seiten von pactd für die Person, auf Deutsch.
#
# Dieselben Schlüssel wie locales/en.ftl (der Test
# `every_key_is_translated_and_used` prüft es). Namen von Marken, Agenten und
# Berechtigungen kommen als Argumente ({ $brand }) und werden nicht übersetzt.
# Anrede: „Sie“.

## Every page (base.html)
base-skip = Zum Inhalt springen
base-nav-account = Verbundene Agenten
base-footer = Geschützt durch pactd · PACT 1.0
base-language = Sprache

## Code entry (device.html)
device-title = Code eingeben
device-heading = Ihren Agenten verbinden
device-agent-asks = { $agent } möchte bei { $brand } für Sie handeln.
device-enter = Geben Sie den Code ein, den Ihr Agent Ihnen anzeigt.
device-check = Prüfen Sie, ob dieser Code genau der ist, den Ihr Agent gerade anzeigt, und fahren Sie dann fort. Wenn Sie nicht eben einen Agenten verbinden wollten, schließen Sie diese Seite.
device-code = Code
device-continue = Weiter

## Consent (consent.html)
consent-title = { $agent } erlauben?
consent-heading = Darf { $agent } bei { $brand } für Sie handeln?
consent-from = von { $origin }
consent-unverified-agent = { $brand } hat diesen Agenten nicht geprüft. Er wurde zugelassen, weil er nachgewiesen hat, wer er ist, aber niemand bei { $brand } hat geprüft, wer ihn betreibt. Erlauben Sie nur, was Sie jeder fremden App erlauben würden.
consent-new-tab = (öffnet in einem neuen Tab)
consent-asked = Angefragt { $ago } ({ $at }) von { $ip }, mit dem Code { $code }.
consent-signed-in-as = Sie sind bei { $brand } angemeldet als { $user }.
consent-not-you = Nicht Sie? Abmelden
consent-only-if = Stimmen Sie nur zu, wenn Sie diesen Agenten gerade selbst verbinden wollten. Andernfalls wählen Sie „Ablehnen“.
consent-already = Diesem Agenten haben Sie bereits erlaubt:
consent-asked-by-agent = Angefragt { $ago } ({ $at }) vom Agenten selbst, während er bei { $brand } für Sie tätig war, mit dem Code { $code }.
consent-only-if-more = Stimmen Sie nur zu, wenn { $agent } auch das tun soll. Was er bereits darf, bleibt so, wie Sie auch entscheiden.
consent-asks-more = Zusätzlich möchte er
consent-still-needs = Für diese Anfrage braucht er trotzdem Ihre Antwort.
consent-asks-to = Er möchte
consent-needs-mfa = (erfordert einen zweiten Faktor)
consent-untick = Entfernen Sie den Haken bei allem, was Sie nicht erlauben möchten.
consent-conditions = Nur unter diesen Bedingungen
consent-approve = Zustimmen
consent-deny = Ablehnen
consent-homepage = Website
consent-privacy = Datenschutzerklärung
consent-terms = Nutzungsbedingungen

## Done (device_done.html)
done-title = Fertig
done-heading = Fertig – zurück zu Ihrem Agenten
done-allowed = Sie haben { $agent } erlaubt, bei { $brand } für Sie zu handeln.
done-it-may = Er darf:
done-close = Sie können diese Seite schließen und zu Ihrem Agenten zurückkehren. Was Sie erlaubt haben, sehen und widerrufen Sie jederzeit unter
done-account-link = Verbundene Agenten
done-declined = Sie haben abgelehnt. { $agent } hat keinen Zugriff auf Ihr Konto bei { $brand } erhalten.
done-close-only = Sie können diese Seite schließen.

## A brand's own login (device_external_login.html)
ext-title = Bei { $brand } anmelden
ext-asks = { $agent } möchte bei { $brand } für Sie handeln (Code { $code }). Melden Sie sich zuerst mit Ihrem Konto bei { $brand } an; danach kommen Sie hierher zurück und entscheiden.
ext-go = Bei { $brand } anmelden

## Error pages (error.html)
error-enter-code = Code eingeben

## Sign-in (login.html)
login-title = Anmelden
login-heading = Bei { $brand } anmelden
login-agent-asks = { $agent } möchte bei { $brand } für Sie handeln. Melden Sie sich an, um zu sehen, worum er bittet, und zu entscheiden.
login-email = E-Mail-Adresse
login-password = Passwort
login-submit = Anmelden
login-forgot = Passwort vergessen?
login-check-name = Sie melden sich bei { $brand } an. Prüfen Sie den Namen, bevor Sie Ihr Passwort eingeben.

## Passkeys at sign-in (passkey_signin.html)
passkey-signin-heading = Oder mit einem Passkey
passkey-signin-text = Melden Sie sich mit der Bildschirmsperre Ihres Geräts oder einem Sicherheitsschlüssel an – ohne Passwort und ohne Code.
passkey-signin-button = Mit einem Passkey anmelden

## What static/webauthn.js says (passkey_messages.html)
passkey-js-failed = Etwas ist schiefgegangen. Bitte versuchen Sie es noch einmal.
passkey-js-cancelled = Die Passkey-Anfrage wurde abgebrochen oder ist abgelaufen. Sie können es noch einmal versuchen.
passkey-js-exists = Dieses Gerät hat bereits einen Passkey für Ihr Konto.
passkey-js-insecure = Unter dieser Adresse lassen sich keine Passkeys verwenden.
passkey-js-error = Beim Passkey ist etwas schiefgegangen. Bitte versuchen Sie es noch einmal.
passkey-js-create-prompt = Folgen Sie der Aufforderung Ihres Browsers, um den Passkey zu erstellen …
passkey-js-none-created = Es wurde kein Passkey erstellt.
passkey-js-added = Passkey hinzugefügt.
passkey-js-use-prompt = Folgen Sie der Aufforderung Ihres Browsers, um Ihren Passkey zu verwenden …
passkey-js-none-chosen = Es wurde kein Passkey ausgewählt.
passkey-js-signed-in = Angemeldet.

## Forgot password (forgot_password.html)
forgot-title = Passwort vergessen
forgot-heading = Passwort vergessen?
forgot-sent = Wenn es bei { $brand } ein Konto mit dieser E-Mail-Adresse gibt, haben wir ihm einen Link geschickt, mit dem Sie ein neues Passwort wählen können. Der Link gilt 30 Minuten lang und nur einmal.
forgot-no-mail = Nach ein paar Minuten noch keine E-Mail? Sehen Sie im Spam-Ordner nach oder fordern Sie den Link noch einmal an.
forgot-back = Zurück zur Anmeldung
forgot-intro = Geben Sie die E-Mail-Adresse Ihres Kontos bei { $brand } ein. Wir schicken ihr einen Link, mit dem Sie ein neues Passwort wählen können.
forgot-send = Link senden

## New password (reset_password.html)
reset-title = Neues Passwort wählen
reset-done-heading = Ihr Passwort ist geändert
reset-done = Alle Browser, die bei Ihrem Konto bei { $brand } angemeldet waren, sind jetzt abgemeldet. Melden Sie sich mit Ihrem neuen Passwort an; Ihr zweiter Faktor, falls Sie einen haben, wird wie bisher abgefragt.
reset-done-agents = Agenten, die Sie verbunden haben, behalten den Zugriff, den Sie ihnen gegeben haben. Auf Ihrer Kontoseite sehen und beenden Sie ihn.
reset-sign-in = Anmelden
reset-intro = Für Ihr Konto bei { $brand }. Verwenden Sie mindestens { $n } Zeichen und ein Passwort, das Sie nirgendwo sonst nutzen.
reset-new = Neues Passwort
reset-again = Neues Passwort wiederholen
reset-submit = Neues Passwort speichern

## Second factor (second_factor.html)
mfa-title = Zweiter Schritt
mfa-reconfirm-heading = Bestätigen Sie, dass Sie es sind
mfa-reconfirm-text = Dafür ist ein zweiter Faktor aus den letzten Minuten nötig.
mfa-back-link = Zurück zur Anfrage,
mfa-back-text = ohne die Berechtigung, die einen zweiten Faktor erfordert (sie ist dort nicht angehakt; über den Rest können Sie entscheiden).
mfa-heading = Noch ein Schritt
mfa-text = Ihr Passwort stimmt. Bestätigen Sie jetzt mit Ihrem zweiten Faktor.
mfa-code = 6-stelliger Code aus Ihrer Authenticator-App
mfa-continue = Weiter
mfa-use-recovery = Stattdessen einen Wiederherstellungscode verwenden
mfa-recovery-code = Wiederherstellungscode
mfa-recovery-once = Jeder Wiederherstellungscode funktioniert nur einmal.
mfa-recovery-submit = Wiederherstellungscode verwenden
mfa-no-app = Für Ihr Konto ist noch keine Authenticator-App eingerichtet. Richten Sie eine ein, um fortzufahren.
mfa-set-up = Authenticator-App einrichten

## A recovery code was used (recovery_used.html)
used-title = Wiederherstellungscode verwendet
used-heading = Sie haben einen Wiederherstellungscode verwendet
used-last = Das war Ihr letzter Wiederherstellungscode. Holen Sie sich auf Ihrer Kontoseite neue, bevor Sie wieder einen brauchen.
used-left = Er kann nicht noch einmal verwendet werden. Sie haben noch { $n ->
    [one] { $n } Wiederherstellungscode
   *[other] { $n } Wiederherstellungscodes
  }.
used-not-you = Wenn Sie ihn nicht selbst verwendet haben, kennt vielleicht jemand Ihre Codes: Holen Sie sich neue und ändern Sie Ihr Passwort.
used-continue = Weiter
used-account = Konto und Sicherheit

## Recovery codes (recovery_codes.html)
codes-title = Wiederherstellungscodes
codes-enrolled = Ihre Authenticator-App ist eingerichtet.
codes-heading = Ihre Wiederherstellungscodes
codes-intro = Falls Sie Ihr Telefon verlieren, können Sie sich mit jedem dieser Codes einmal anmelden. Bewahren Sie sie jetzt sicher auf:
codes-once = Sie werden nur dieses eine Mal angezeigt.
codes-old = Ältere Wiederherstellungscodes gelten nicht mehr.
codes-copy = Codes kopieren
codes-copied = Kopiert. Fügen Sie sie an einem sicheren Ort ein.
codes-copy-failed = Kopieren hat hier nicht funktioniert. Laden Sie sie stattdessen herunter oder schreiben Sie sie auf.
codes-download = Als Textdatei herunterladen
codes-file-heading = Wiederherstellungscodes für { $email } bei { $brand }. Jeder Code funktioniert einmal.
codes-saved = Gespeichert – weiter

## Authenticator app (totp_setup.html)
totp-title = Authenticator-App
totp-replace-heading = Authenticator-App ersetzen
totp-replace-notice = Sobald Sie bestätigen, gelten die Codes Ihrer alten Authenticator-App und Ihre alten Wiederherstellungscodes nicht mehr.
totp-heading = Authenticator-App einrichten
totp-required = { $brand } verlangt für jedes Konto einen zweiten Faktor. Richten Sie ihn einmal ein, um die Anmeldung abzuschließen.
totp-step-open = Öffnen Sie eine Authenticator-App auf Ihrem Telefon und fügen Sie ein Konto hinzu.
totp-step-scan = Scannen Sie diesen QR-Code oder tippen Sie den Schlüssel unten ein.
totp-step-enter = Geben Sie den 6-stelligen Code ein, den die App anzeigt.
totp-same-device = Auf diesem Gerät? In Ihrer Authenticator-App öffnen
totp-account = Konto:
totp-key = Schlüssel:
totp-code = 6-stelliger Code aus der App
totp-confirm = Bestätigen
totp-codes-heading = Wiederherstellungscodes
totp-codes-text = Wiederherstellungscodes verloren? Holen Sie sich einen neuen Satz; die alten gelten dann nicht mehr.
totp-codes-new = Neue Wiederherstellungscodes

## Remove an agent's access (revoke_confirm.html)
revoke-title = Zugriff entziehen
revoke-heading = { $agent } den Zugriff entziehen?
revoke-text = { $agent } kann dann bei { $brand } nicht mehr für Sie handeln. Er kann nicht mehr:
revoke-at-once = Das gilt sofort. Soll er später wieder für Sie handeln, stimmen Sie erneut zu.
revoke-confirm = Ja, Zugriff entziehen
revoke-keep = Behalten

## Delete the account (account_delete.html)
del-title = Konto löschen
del-heading = Ihr Konto bei { $brand } löschen?
del-cannot-undo = Das lässt sich nicht rückgängig machen. Sofort und auf allen Servern gilt:
del-grants-end = Jeder Agent, der mit Ihrem Konto verbunden ist, verliert seinen Zugriff ({ $n } derzeit verbunden);
del-erased = Ihre E-Mail-Adresse, Ihr Passwort, Ihre Authenticator-App, Passkeys, Wiederherstellungscodes und Anmeldungen werden gelöscht.
del-receipts-kept = Die signierten Belege darüber, was Agenten für Sie getan haben, bleiben als Nachweis von { $brand } für diese Vorgänge erhalten. Sie nennen nur eine nichtssagende Kontonummer, nicht Ihre E-Mail-Adresse.
del-password = Ihr Passwort, zur Bestätigung, dass Sie es sind
del-confirm = Mein Konto löschen
del-keep = Behalten

## Connected agents (account.html)
acc-title = Verbundene Agenten
acc-signed-in = Sie sind bei { $brand } angemeldet.
acc-signed-in-as = Sie sind bei { $brand } angemeldet als { $email }.
acc-agents-heading = Agenten, die für Sie handeln dürfen
acc-no-agents = Derzeit darf kein Agent bei { $brand } für Sie handeln.
acc-active-until = Aktiv – darf bis { $until } für Sie handeln
acc-unverified-agent = { $brand } hat diesen Agenten nicht geprüft: Er wurde zugelassen, weil er nachgewiesen hat, wer er ist, aber niemand bei { $brand } hat geprüft, wer ihn betreibt.
acc-may-do = Was er darf:
acc-limits = Nur innerhalb dieser Grenzen:
acc-connected-used = Verbunden { $connected } · Zuletzt genutzt { $used }
acc-remove-access = Zugriff entziehen …
acc-past-heading = Beendete Zugriffe
acc-it-could = Er konnte:
acc-activity-heading = Letzte Aktivität
acc-no-activity = Bisher hat noch kein Agent etwas für Sie getan.
acc-replied-only = Hat geantwortet, ohne Ihre Daten zu verwenden.
acc-using = Verwendet:
acc-security-heading = Anmeldung und Sicherheit
acc-passkeys = Passkeys
acc-no-passkeys = Sie haben noch keine Passkeys. Mit einem Passkey melden Sie sich über die Bildschirmsperre Ihres Geräts an, statt mit Passwort und Code.
acc-passkey-dates = Hinzugefügt { $added } · Zuletzt genutzt { $used }
acc-passkey-remove = Entfernen
acc-passkey-reconfirm = Um Passkeys hinzuzufügen oder zu entfernen, bestätigen Sie zuerst, dass Sie es sind:
acc-passkey-reconfirm-code = Geben Sie einen Code aus Ihrer Authenticator-App ein
acc-passkey-reconfirm-or = , oder
acc-passkey-reconfirm-passkey = melden Sie sich ab und mit einem Passkey wieder an.
acc-passkey-name = Name für den neuen Passkey (optional)
acc-passkey-name-example = Zum Beispiel: Mein Laptop
acc-passkey-add = Passkey hinzufügen
acc-passkey-unsupported = Dieser Browser kann keine Passkeys erstellen.
acc-passkeys-need-name = Auf dieser Website lassen sich noch keine Passkeys verwenden: Sie wird über eine IP-Adresse erreicht, und Passkeys brauchen einen Namen für die Website (etwa localhost oder shop.example). Die Betreiber dieser Website können sie einschalten, indem sie ihr einen Namen geben.
acc-browsers-heading = Wo Sie angemeldet sind
acc-this-browser = Dieser Browser
acc-other-browser = Ein anderer Browser
acc-browser-dates = Angemeldet { $since } · Zuletzt aktiv { $seen }
acc-sign-out-others = Überall sonst abmelden
acc-totp-heading = Authenticator-App
acc-totp-on = Für Ihr Konto ist eine Authenticator-App eingerichtet.
acc-totp-reset = Authenticator-App zurücksetzen
acc-totp-off = Es ist keine Authenticator-App eingerichtet.
acc-totp-set-up = Authenticator-App einrichten
acc-recovery-heading = Wiederherstellungscodes
acc-recovery-left = Sie haben { $n ->
    [one] { $n } unbenutzten Wiederherstellungscode
   *[other] { $n } unbenutzte Wiederherstellungscodes
  }.
acc-recovery-new = Neue Wiederherstellungscodes holen
acc-recovery-replace = Neue Codes ersetzen alle alten.
acc-delete-heading = Konto löschen
acc-delete-text = Beendet den Zugriff aller Agenten und löscht Ihre E-Mail-Adresse, Anmeldemethoden und Sitzungen.
acc-delete-link = Mein Konto löschen …
acc-sign-out = Abmelden

## Sign-in messages (web/login.rs)
login-signed-out = Sie sind abgemeldet.
login-err-credentials = E-Mail-Adresse und Passwort passen zu keinem Konto hier. Prüfen Sie beides und versuchen Sie es noch einmal.
login-err-empty = Geben Sie Ihre E-Mail-Adresse und Ihr Passwort ein.
login-err-which-service = Wir wissen nicht, bei welchem Dienst Sie sich anmelden möchten. Öffnen Sie den Link Ihres Agenten (oder von der Website des Dienstes) noch einmal.
login-err-unknown-service = Diesen Dienst kennen wir nicht. Prüfen Sie den Link und versuchen Sie es noch einmal.
mfa-err-empty = Geben Sie einen Code ein.
mfa-err-wrong = Dieser Code hat nicht funktioniert. Prüfen Sie ihn und versuchen Sie es noch einmal.
mfa-err-replayed = Dieser Code wurde bereits verwendet. Warten Sie auf den nächsten Code in Ihrer App und geben Sie ihn ein.
mfa-err-external = Sie haben sich über die eigene Anmeldung des Dienstes angemeldet; dort werden zweite Faktoren geprüft.

## Waiting after too many attempts (web/login.rs)
wait-too-many-attempts = Zu viele Versuche.
wait-too-many-sign-ins = Zu viele Anmeldeversuche aus Ihrem Netzwerk.
wait-too-many-codes = Zu viele Code-Versuche.
wait-too-many-requests = Zu viele Anfragen aus Ihrem Netzwerk.
wait-seconds = { $what } Bitte warten Sie { $n ->
    [one] { $n } Sekunde
   *[other] { $n } Sekunden
  } und versuchen Sie es dann noch einmal.
wait-minutes = { $what } Bitte warten Sie { $n ->
    [one] { $n } Minute
   *[other] { $n } Minuten
  } und versuchen Sie es dann noch einmal.

## Authenticator app messages (web/mfa.rs)
totp-err-external = Sie haben sich über die eigene Anmeldung des Dienstes angemeldet; dort verwalten Sie Ihre zweiten Faktoren.
totp-err-expired = Diese Einrichtungsseite ist abgelaufen. Öffnen Sie sie erneut und scannen Sie den neuen QR-Code.
totp-err-empty = Geben Sie den 6-stelligen Code ein, den Ihre App anzeigt.
totp-err-wrong = Dieser Code hat nicht funktioniert. Prüfen Sie, ob die Uhr Ihres Telefons stimmt, und versuchen Sie den nächsten Code.

## Deleting the account (web/account_delete.rs)
del-err-external = Ihr Konto wird von der eigenen Anmeldung der Marke verwaltet, nicht hier: Löschen Sie es dort. Den Zugriff einzelner Agenten entziehen Sie auf der Seite „Verbundene Agenten“.
del-err-signed-out = Melden Sie sich an, um Ihr Konto zu verwalten.
del-err-password = Dieses Passwort stimmt nicht. Es wurde nichts gelöscht.
del-err-reconfirm = Bestätigen Sie zuerst erneut Ihren zweiten Faktor (ab- und wieder anmelden) und löschen Sie dann. Es wurde nichts gelöscht.
del-done-title = Ihr Konto wurde gelöscht
del-done = Der Zugriff aller Agenten ist beendet, und Ihre E-Mail-Adresse, Anmeldemethoden und Sitzungen sind gelöscht.

## Error pages (web/page.rs)
err-render = Etwas ist schiefgegangen. Bitte versuchen Sie es noch einmal.
err-unacceptable = Etwas an Ihrer Eingabe können wir nicht annehmen. Prüfen Sie sie und versuchen Sie es noch einmal.
err-bad-request = Das hat nicht geklappt
err-forbidden = Anfrage abgelehnt
err-not-found = Nicht gefunden
err-too-many = Bitte warten Sie einen Moment
err-unavailable-title = Bitte versuchen Sie es gleich noch einmal
err-unavailable = Wir erreichen unsere Daten gerade nicht. Es wurde nichts geändert. Bitte versuchen Sie es gleich noch einmal.
err-timed-out = Das hat länger gedauert als vorgesehen. Bitte versuchen Sie es gleich noch einmal.
err-internal-title = Etwas ist schiefgegangen
err-internal = Bei uns ist etwas schiefgegangen. Bitte versuchen Sie es gleich noch einmal.
err-no-such-page = Unter dieser Adresse gibt es keine Seite. Wenn Sie einem Link Ihres Agenten gefolgt sind, öffnen Sie ihn noch einmal oder bitten Sie Ihren Agenten um einen neuen.
err-no-such-language = Diese Sprache gibt es hier nicht.
err-cross-site = Diese Anfrage kam von einer anderen Website und wurde abgelehnt.
err-unverified = Diese Anfrage ließ sich nicht überprüfen und wurde abgelehnt.
err-session-changed = Ihre Sitzung hat sich geändert. Gehen Sie zurück, laden Sie die Seite neu und versuchen Sie es noch einmal.

## Code entry and consent messages (web/device.rs)
device-expired-title = Dieser Code ist abgelaufen
device-expired = Codes gelten nur wenige Minuten. Bitten Sie Ihren Agenten um einen neuen Code und geben Sie ihn hier ein.
device-used-title = Dieser Code wurde bereits verwendet
device-used = Diese Anfrage wurde bereits beantwortet; mit diesem Code gibt es nichts mehr zu tun. Wenn Ihr Agent noch Ihre Erlaubnis braucht, bitten Sie ihn um einen neuen Code.
device-err-too-many = Es wurden zu viele Codes ausprobiert. Warten Sie { $n ->
    [one] { $n } Sekunde
   *[other] { $n } Sekunden
  } und geben Sie dann den Code ein, den Ihr Agent anzeigt.
device-err-malformed = Das ist kein Code von einem Agenten. Codes bestehen aus 8 Buchstaben, etwa BCDF-GHJK.
device-err-unknown = Diesen Code kennen wir nicht. Vergleichen Sie ihn mit dem, den Ihr Agent anzeigt, oder bitten Sie ihn um einen neuen.
device-err-no-brand = Diese Marke gibt es nicht mehr.
consent-unregistered-agent = Ein nicht registrierter Agent
consent-err-not-requested = Erlaubt werden kann nur, worum dieser Agent gebeten hat. Es wurde nichts geändert.
consent-err-gone = Diese Anfrage gibt es nicht mehr. Bitten Sie Ihren Agenten um einen neuen Code.
consent-err-decided = Diese Anfrage kann nicht mehr beantwortet werden: Sie ist abgelaufen oder wurde schon beantwortet.
consent-err-other-request = Diese Seite gehörte zu einer anderen Anfrage: Inzwischen wurde ein anderer Code eingegeben, vielleicht in einem anderen Tab. Es wurde nichts erlaubt. Prüfen Sie die jetzt angezeigte Anfrage und entscheiden Sie erneut.
consent-err-other-request-not-you = Diese Seite gehörte zu einer anderen Anfrage: Inzwischen wurde ein anderer Code eingegeben, vielleicht in einem anderen Tab. Prüfen Sie die jetzt angezeigte Anfrage.
consent-err-no-action = Wählen Sie „Zustimmen“ oder „Ablehnen“.
consent-err-none-ticked = Setzen Sie mindestens einen Haken, um zuzustimmen, oder wählen Sie „Ablehnen“.
consent-err-mfa-brand-login = Eine dieser Berechtigungen erfordert einen zweiten Faktor. Melden Sie sich erneut mit Ihrem zweiten Faktor an, um sie zu erlauben – oder entfernen Sie den Haken.
consent-err-mfa = Eine dieser Berechtigungen erfordert einen zweiten Faktor. Entfernen Sie den Haken oder melden Sie sich erneut mit einem zweiten Faktor an.
consent-detail-unknown-type = Einschränkung vom Typ { $type }
consent-detail-undescribed = Begrenzt durch { $type }
consent-op-heading = Dies einmal erlauben?
consent-op-why = Warum Sie gefragt werden: { $why }.
consent-op-once = Wenn Sie zustimmen, ist genau dies einmal erlaubt. Alles andere braucht weiterhin Ihre Erlaubnis.
consent-op-approve = Einmal erlauben
consent-narrow = Sie können weniger erlauben:
consent-narrow-amount = { $label } (höchstens { $max }):
consent-narrow-count = { $label } (höchstens { $max }):
consent-err-keep-one = Lassen Sie bei { $label } mindestens einen Eintrag angehakt, oder wählen Sie Ablehnen.
consent-err-amount = Geben Sie für { $label } einen Betrag ein, etwa 12,50.
consent-err-count = Geben Sie für { $label } eine ganze Zahl ein.
consent-err-narrow-only = Sie können nur weniger erlauben, als der Agent erbeten hat, nicht mehr. Es wurde nichts erlaubt.
consent-err-operation-gone = Diese Anfrage wurde unter einem Zugriff gestellt, der nicht Ihrer ist oder beendet wurde. Es wurde nichts erlaubt.
consent-err-other-account = Diese Anfrage gilt einem anderen Konto: dem, für das Ihr Agent handelt. Es wurde nichts angezeigt oder erlaubt. Melden Sie sich ab, dann mit diesem Konto an, und geben Sie den Code erneut ein.
consent-err-agent-off = Das Geschäft hat den Zugang dieses Agenten abgeschaltet, seit er gefragt hat. Es wurde nichts erlaubt.
done-your-agent = Ihr Agent
ago-now = gerade eben
ago-minutes = { $n ->
    [one] vor { $n } Minute
   *[other] vor { $n } Minuten
  }
ago-hours = { $n ->
    [one] vor { $n } Stunde
   *[other] vor { $n } Stunden
  }
ago-days = { $n ->
    [one] vor { $n } Tag
   *[other] vor { $n } Tagen
  }

## A brand's own login, messages (web/brand_login.rs)
ext-an-agent = Ein Agent
ext-err-title = Anmeldung nicht angenommen
ext-err-malformed = Die Anmeldung kam in einer Form zurück, die wir nicht verstehen. Beginnen Sie noch einmal mit dem Code, den Ihr Agent angezeigt hat.
ext-err-invalid = Wir konnten diese Anmeldung nicht bestätigen; es wurde nichts geändert. Beginnen Sie noch einmal mit dem Code, den Ihr Agent angezeigt hat.
ext-err-not-this-browser = Diese Anmeldung wurde nicht in diesem Browser begonnen; es wurde nichts geändert, und Sie wurden nicht angemeldet. Wenn Sie einen Code Ihres eigenen Agenten eingeben wollten, geben Sie ihn hier noch einmal ein und melden Sie sich auf der folgenden Seite an.

## Forgot password, messages and the mail (web/password_reset.rs)
forgot-err-not-offered = Das Zurücksetzen des Passworts per E-Mail ist hier nicht eingerichtet. Bitten Sie den Kundenservice des Shops, Ihnen wieder Zugang zu Ihrem Konto zu verschaffen.
forgot-err-email = Geben Sie die E-Mail-Adresse Ihres Kontos ein.
reset-err-dead-link = Dieser Link ist abgelaufen oder wurde bereits verwendet. Fordern Sie einen neuen an.
reset-err-mismatch = Die beiden Passwörter stimmen nicht überein. Geben Sie das neue Passwort zweimal ein.
reset-err-short = Wählen Sie ein Passwort mit mindestens { $n } Zeichen.
mail-reset-subject = Setzen Sie Ihr Passwort bei { $brand } zurück
mail-reset-asked = Jemand möchte das Passwort Ihres Kontos bei { $brand } zurücksetzen.
mail-reset-open = Um ein neues Passwort zu wählen, öffnen Sie diesen Link innerhalb von { $n } Minuten:
mail-reset-once = Der Link funktioniert nur einmal. Ihr zweiter Faktor, falls Sie einen haben, wird bei der Anmeldung weiterhin abgefragt.
mail-reset-ignore = Wenn Sie das nicht angefordert haben, ignorieren Sie diese Nachricht: Ihr Passwort bleibt, wie es ist.

## Connected agents, messages (web/account.rs)
acc-done-revoked = Zugriff entzogen. Dieser Agent kann nicht mehr für Sie handeln.
acc-done-passkey-added = Passkey hinzugefügt. Sie können sich jetzt damit anmelden.
acc-done-passkey-removed = Passkey entfernt.
acc-done-signed-out-others = Sie sind überall sonst abgemeldet.
acc-err-no-store = Diesen Shop gibt es hier nicht.
acc-err-which-store = Öffnen Sie diese Seite über den Link auf der Website Ihres Shops, damit wir wissen, wo wir Sie anmelden sollen.
acc-err-sessions-signed-out = Melden Sie sich mit Ihrem Konto an, um zu verwalten, wo Sie angemeldet sind.
acc-err-signed-out = Melden Sie sich an, um Ihre verbundenen Agenten zu verwalten.
acc-err-no-grant = Eine solche Verbindung gibt es in Ihrem Konto nicht.
acc-never = nie
ended-expired = Abgelaufen am { $when }.
ended-by-you = Sie haben den Zugriff am { $when } entzogen.
ended-account-deleted = Ihr Konto wurde am { $when } gelöscht.
ended-by-agent = Der Agent hat seinen Zugriff am { $when } aufgegeben.
ended-token-reuse = Am { $when } automatisch beendet: Ein Token dieses Agenten wurde zweimal verwendet, was auf einen Diebstahl hindeuten kann.
ended-superseded = Am { $when } ersetzt, als Sie diesem Agenten mehr erlaubt haben.
ended-by-staff = Das Team von { $brand } hat den Zugriff am { $when } entzogen.
ended-by-staff-reason = Das Team von { $brand } hat den Zugriff am { $when } entzogen. Angegebener Grund: { $reason }
ended-other = Zugriff am { $when } beendet ({ $reason }).
ended-plain = Zugriff am { $when } beendet.
status-revoked = Entzogen am { $when }
status-expired = Abgelaufen am { $when }
status-active = Aktiv
action-list-orders = Hat Ihre Bestellungen angesehen
action-order-status = Hat den Status einer Bestellung geprüft
action-cancel-order = Hat eine Bestellung storniert
action-other = Hat „{ $tool }“ verwendet
action-approved-once = (von Ihnen einmal erlaubt)
action-no-reason = ohne Angabe von Gründen
action-failed = { $action } — der Shop hat es nicht getan: { $why }
action-unknown = { $action } — keine Antwort rechtzeitig; es ist vielleicht geschehen, vielleicht nicht
action-beyond-effect = { $action } — der Shop meldet { $effect }, mehr als Sie erlaubt haben
action-refused = Nicht getan: { $action } — { $why }
refused-beyond = es geht über das hinaus, was Sie erlaubt haben, daher wurden Sie gefragt
refused-scope = es brauchte Ihre Erlaubnis
refused-other = es war nicht erlaubt

## Passkeys, messages (web/passkeys.rs)
pk-err-unavailable = Auf dieser Website sind keine Passkeys verfügbar.
pk-err-db = Wir erreichen unsere Daten gerade nicht. Bitte versuchen Sie es gleich noch einmal.
pk-err-session = Ihre Sitzung ist abgelaufen. Laden Sie die Seite neu und versuchen Sie es noch einmal.
pk-err-signed-out = Melden Sie sich mit Ihrem Konto an, um Passkeys zu verwalten.
pk-err-too-many = Sie haben so viele Passkeys, wie ein Konto haben kann. Entfernen Sie zuerst einen.
pk-err-name = Geben Sie dem Passkey einen kürzeren Namen (bis zu 64 Zeichen).
pk-err-answer = Die Antwort des Passkeys wurde nicht verstanden.
pk-err-ceremony = Diese Passkey-Anfrage ist abgelaufen oder wurde bereits verwendet. Bitte versuchen Sie es noch einmal.
pk-err-verify = Der Passkey konnte nicht überprüft werden. Bitte versuchen Sie es noch einmal.
pk-err-duplicate = Dieser Passkey ist bereits registriert.
pk-err-too-many-attempts = Zu viele Anmeldeversuche. Bitte warten Sie einen Moment und versuchen Sie es dann noch einmal.
pk-err-no-brand = Öffnen Sie die Anmeldeseite über die Website Ihres Shops.
pk-err-unknown-brand = Unbekannte Marke.
pk-err-no-such = Einen solchen Passkey gibt es nicht.
pk-err-reconfirm = Um Ihre Passkeys zu ändern, bestätigen Sie zuerst, dass Sie es sind: Geben Sie erneut einen Code aus Ihrer Authenticator-App ein, oder melden Sie sich ab und mit einem Passkey wieder an.
mfa-err-sign-in-again = Um eine erste Bestätigungsmethode hinzuzufügen, muss Ihre Anmeldung kurz zurückliegen: Melden Sie sich ab, melden Sie sich erneut mit Ihrem Passwort an und fügen Sie sie innerhalb von 10 Minuten hinzu.
pk-err-unknown-passkey = Dieser Passkey wurde nicht erkannt. Verwenden Sie einen anderen Passkey oder melden Sie sich mit Ihrem Passwort an.
pk-err-login-ceremony = Diese Anmeldeanfrage ist abgelaufen oder wurde bereits verwendet. Bitte versuchen Sie es noch einmal.

## Anmeldung beim OpenID-Anbieter der Marke (oidc_no_mfa.html)
oidc-nomfa-title = Kein zweiter Faktor von { $brand }
oidc-nomfa-heading = Ihre Anmeldung enthielt keinen zweiten Faktor
oidc-nomfa-body = Sie sind bei { $brand } angemeldet, aber dessen Anmeldedienst hat keinen zweiten Faktor bestätigt (etwa einen Code aus einer App oder einen Sicherheitsschlüssel), obwohl wir danach gefragt haben. Berechtigungen, die einen zweiten Faktor erfordern, können mit dieser Anmeldung nicht erteilt werden.
oidc-nomfa-next = Gehen Sie zurück zur Anfrage und entfernen Sie die Haken bei diesen Berechtigungen, oder richten Sie bei { $brand } einen zweiten Faktor ein und melden Sie sich erneut an.
oidc-nomfa-back = Zurück zur Anfrage

## Anmeldung beim OpenID-Anbieter der Marke, Meldungen (web/oidc_login.rs)
oidc-step-up-notice = Eine dieser Berechtigungen erfordert einen zweiten Faktor. Melden Sie sich erneut mit Ihrem zweiten Faktor an, um sie zu erteilen – oder gehen Sie zurück und entfernen Sie den Haken.
oidc-err-unavailable-title = Anmeldung nicht verfügbar
oidc-err-unreachable = Wir konnten den Anmeldedienst dieses Shops nicht erreichen; es wurde nichts geändert. Bitte versuchen Sie es in ein paar Minuten noch einmal.
oidc-err-provider = Wir konnten die Anmeldung beim Anmeldedienst dieses Shops nicht abschließen; es wurde nichts geändert. Bitte versuchen Sie es in ein paar Minuten noch einmal.
oidc-err-not-accepted-title = Anmeldung nicht angenommen
oidc-err-malformed = Die Anmeldung kam in einer Form zurück, die wir nicht verstehen; es wurde nichts geändert. Beginnen Sie noch einmal mit dem Code, den Ihr Agent angezeigt hat.
oidc-err-unknown = Diese Anmeldung wurde bereits verwendet, ist abgelaufen oder wurde nie hier begonnen; es wurde nichts geändert. Beginnen Sie noch einmal mit dem Code, den Ihr Agent angezeigt hat.
oidc-err-not-this-browser = Diese Anmeldung wurde nicht in diesem Browser begonnen; es wurde nichts geändert, und Sie wurden nicht angemeldet. Wenn Sie einen Code Ihres eigenen Agenten eingeben wollten, geben Sie ihn hier noch einmal ein und melden Sie sich auf der folgenden Seite an.
oidc-err-stale-title = Diese Anfrage kann nicht mehr beantwortet werden
oidc-err-stale = Die Anfrage, für die diese Anmeldung gedacht war, ist abgelaufen, wurde bereits beantwortet, oder seitdem wurde ein anderer Code eingegeben. Es wurde nichts geändert. Bitten Sie Ihren Agenten um einen neuen Code, wenn er Ihre Erlaubnis noch braucht.
oidc-err-invalid = Wir konnten diese Anmeldung nicht bestätigen; es wurde nichts geändert, und Sie wurden nicht angemeldet. Beginnen Sie noch einmal mit dem Code, den Ihr Agent angezeigt hat.
oidc-err-provider-said-title = Anmeldung nicht abgeschlossen
oidc-err-provider-said = Der Anmeldedienst hat die Anmeldung beendet, ohne Sie anzumelden (Meldung: { $code }). Es wurde nichts geändert. Beginnen Sie noch einmal mit dem Code, den Ihr Agent angezeigt hat.


## Limits in plain words (web/limit_words.rs)
limit-range = { $from } bis { $to }
limit-equals = { $label }: nur { $value }
limit-one-of = { $label }: nur { $value }
limit-at-most = { $label }: höchstens { $value }
limit-none = ohne { $label }
limit-total = { $label }: insgesamt höchstens { $value }
limit-window = { $label }: nur { $value }
limit-calls = { $label }: höchstens { $n }
limit-used-calls = { $used } von { $cap } { $label } genutzt
limit-used-amount = { $label }: { $used } von { $cap } genutzt
limit-beyond-value = das geht über das hinaus, was Sie erlaubt haben ({ $limit })
limit-beyond-used-up = was Sie erlaubt haben, ist aufgebraucht ({ $limit })
limit-beyond-not-covered = diese Aktion war nicht Teil dessen, was Sie erlaubt haben
limit-unreadable = Grenzen, die sich nicht lesen lassen: jede begrenzte Aktion wird abgelehnt, bis Sie erneut zustimmen.
limit-once-open = Einmal erlaubt: „{ $tool }“ (noch nicht genutzt)
limit-once-used = Einmal erlaubt: „{ $tool }“ (genutzt)
home-title = PACT-Autorisierungsserver
home-heading = Dies ist ein PACT-Autorisierungsserver
home-what = Persönliche KI-Agenten sprechen über A2A mit den hier betriebenen Marken und handeln im Konto einer Person nur mit der Erlaubnis, die diese Person auf diesem Server erteilt.
home-card = Die Agent Card jeder Marke, für Agenten:
home-device = Einen Code eingeben, den Ihr Agent Ihnen gegeben hat
home-admin = Konsole für Mitarbeitende
home-no-brand = Noch ist keine Marke eingerichtet. Fügen Sie auf dem Server eine hinzu mit

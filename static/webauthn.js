// WebAuthn ceremonies for pactd's pages (the only script pactd serves).
//
// Plain ES2017, no framework, no inline script (the CSP forbids it). It
// attaches to elements by id:
//   #passkey-signin (data-brand, data-next, data-csrf), #passkey-signin-button,
//   #passkey-signin-status                       — the login page partial
//   #passkey-add, #passkey-name, #passkey-register, #passkey-unsupported,
//   #passkey-status                               — the account page
// A container may name its own endpoints (data-start-url, data-finish-url):
// the staff console uses the same ceremonies under /admin.
// The server speaks webauthn-rs's JSON: binary fields are base64url strings,
// which the browser API wants as ArrayBuffers (and gives back as such).
(function () {
  "use strict";

  var supported =
    typeof window.PublicKeyCredential === "function" &&
    !!navigator.credentials &&
    typeof navigator.credentials.create === "function" &&
    typeof navigator.credentials.get === "function";

  function b64urlToBuffer(value) {
    var s = String(value).replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) {
      s += "=";
    }
    var binary = atob(s);
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) {
      bytes[i] = binary.charCodeAt(i);
    }
    return bytes.buffer;
  }

  function bufferToB64url(buffer) {
    var bytes = new Uint8Array(buffer);
    var binary = "";
    for (var i = 0; i < bytes.length; i++) {
      binary += String.fromCharCode(bytes[i]);
    }
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function csrfToken(container) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta && meta.getAttribute("content")) {
      return meta.getAttribute("content");
    }
    if (container && container.dataset.csrf) {
      return container.dataset.csrf;
    }
    var input = document.querySelector('input[name="csrf"]');
    return input ? input.value : "";
  }

  function show(region, text, isError) {
    if (!region) {
      return;
    }
    region.textContent = text;
    region.className = text ? (isError ? "error" : "notice") : "";
  }

  // POSTs JSON with the CSRF header; resolves to the parsed answer or throws
  // an Error carrying the server's message.
  function post(url, body, csrf) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "X-CSRF-Token": csrf
      },
      body: JSON.stringify(body || {})
    }).then(function (res) {
      return res
        .json()
        .catch(function () {
          return {};
        })
        .then(function (data) {
          if (!res.ok) {
            var err = new Error(data.error || "Something went wrong. Please try again.");
            err.status = res.status;
            throw err;
          }
          return data;
        });
    });
  }

  // What the browser API throws, in words for the person.
  function explain(err) {
    if (err && err.name === "NotAllowedError") {
      return "The passkey request was cancelled or timed out. You can try again.";
    }
    if (err && err.name === "InvalidStateError") {
      return "This device already has a passkey for your account.";
    }
    if (err && err.name === "SecurityError") {
      return "Passkeys cannot be used on this address.";
    }
    if (err && err.message && typeof err.status === "number") {
      return err.message;
    }
    return "Something went wrong with the passkey. Please try again.";
  }

  function creationOptions(answer) {
    var pk = answer.publicKey;
    pk.challenge = b64urlToBuffer(pk.challenge);
    pk.user.id = b64urlToBuffer(pk.user.id);
    if (pk.excludeCredentials) {
      pk.excludeCredentials = pk.excludeCredentials.map(function (c) {
        return Object.assign({}, c, { id: b64urlToBuffer(c.id) });
      });
    }
    return { publicKey: pk };
  }

  function requestOptions(answer) {
    var pk = answer.publicKey;
    pk.challenge = b64urlToBuffer(pk.challenge);
    if (pk.allowCredentials) {
      pk.allowCredentials = pk.allowCredentials.map(function (c) {
        return Object.assign({}, c, { id: b64urlToBuffer(c.id) });
      });
    }
    // A modal request from the button, not conditional (autofill) mediation.
    return { publicKey: pk };
  }

  // Only the client extension outputs webauthn-rs reads.
  function extensionResults(credential, names) {
    var out = {};
    var all = typeof credential.getClientExtensionResults === "function"
      ? credential.getClientExtensionResults()
      : {};
    names.forEach(function (name) {
      if (all && all[name] !== undefined) {
        out[name] = all[name];
      }
    });
    return out;
  }

  function registrationJson(credential) {
    var response = credential.response;
    var json = {
      id: credential.id,
      rawId: bufferToB64url(credential.rawId),
      type: credential.type,
      response: {
        attestationObject: bufferToB64url(response.attestationObject),
        clientDataJSON: bufferToB64url(response.clientDataJSON)
      },
      extensions: extensionResults(credential, ["credProps", "appid"])
    };
    if (typeof response.getTransports === "function") {
      json.response.transports = response.getTransports();
    }
    return json;
  }

  function assertionJson(credential) {
    var response = credential.response;
    return {
      id: credential.id,
      rawId: bufferToB64url(credential.rawId),
      type: credential.type,
      response: {
        authenticatorData: bufferToB64url(response.authenticatorData),
        clientDataJSON: bufferToB64url(response.clientDataJSON),
        signature: bufferToB64url(response.signature),
        userHandle: response.userHandle ? bufferToB64url(response.userHandle) : null
      },
      extensions: extensionResults(credential, ["appid"])
    };
  }

  // The account page: add a passkey.
  function setUpRegistration() {
    var area = document.getElementById("passkey-add");
    var button = document.getElementById("passkey-register");
    var status = document.getElementById("passkey-status");
    if (!area || !button) {
      return;
    }
    if (!supported) {
      var note = document.getElementById("passkey-unsupported");
      if (note) {
        note.hidden = false;
      }
      return;
    }
    area.hidden = false;
    var nameInput = document.getElementById("passkey-name");
    button.addEventListener("click", function () {
      var csrf = csrfToken(null);
      var ceremonyId = null;
      button.disabled = true;
      show(status, "Follow your browser's prompt to create the passkey…", false);
      post(area.dataset.startUrl || "/passkeys/register/start", {}, csrf)
        .then(function (answer) {
          ceremonyId = answer.ceremonyId;
          return navigator.credentials.create(creationOptions(answer));
        })
        .then(function (credential) {
          if (!credential) {
            throw new Error("No passkey was created.");
          }
          return post(
            area.dataset.finishUrl || "/passkeys/register/finish",
            {
              ceremonyId: ceremonyId,
              name: nameInput ? nameInput.value : "",
              credential: registrationJson(credential)
            },
            csrf
          );
        })
        .then(function (done) {
          show(status, "Passkey added.", false);
          window.location.assign(done.redirect || "/account");
        })
        .catch(function (err) {
          button.disabled = false;
          show(status, explain(err), true);
        });
    });
  }

  // The login page: sign in with a passkey.
  function setUpSignIn() {
    var area = document.getElementById("passkey-signin");
    var button = document.getElementById("passkey-signin-button");
    var status = document.getElementById("passkey-signin-status");
    if (!area || !button || !supported) {
      return;
    }
    area.hidden = false;
    button.addEventListener("click", function () {
      var params = new URLSearchParams(window.location.search);
      var brand = area.dataset.brand || params.get("brand") || "";
      var next = area.dataset.next || params.get("next") || "";
      var query = "?brand=" + encodeURIComponent(brand);
      if (next) {
        query += "&next=" + encodeURIComponent(next);
      }
      var startUrl = area.dataset.startUrl || "/passkeys/login/start" + query;
      var finishUrl = area.dataset.finishUrl || "/passkeys/login/finish";
      var csrf = csrfToken(area);
      var ceremonyId = null;
      button.disabled = true;
      show(status, "Follow your browser's prompt to use your passkey…", false);
      post(startUrl, {}, csrf)
        .then(function (answer) {
          ceremonyId = answer.ceremonyId;
          return navigator.credentials.get(requestOptions(answer));
        })
        .then(function (credential) {
          if (!credential) {
            throw new Error("No passkey was chosen.");
          }
          return post(
            finishUrl,
            { ceremonyId: ceremonyId, credential: assertionJson(credential) },
            csrf
          );
        })
        .then(function (done) {
          show(status, "Signed in.", false);
          window.location.assign(done.redirect || "/account");
        })
        .catch(function (err) {
          button.disabled = false;
          if (err && err.status === 404) {
            area.hidden = true;
            return;
          }
          show(status, explain(err), true);
        });
    });
  }

  function start() {
    setUpRegistration();
    setUpSignIn();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();

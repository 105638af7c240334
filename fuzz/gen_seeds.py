#!/usr/bin/env python3
"""Writes the hand-made seed inputs of every fuzz target into corpus/<target>/.

Run from anywhere: `python3 fuzz/gen_seeds.py` (needs python3-cryptography).
The seeds follow the input layouts described at the top of each target; the
P-256 keys are derived exactly as in src/lib.rs (scalar = SHA-256(seed)), so
the signed tokens verify in the harness. Existing files are left alone; seeds
are named seed-*, fuzzer finds by their SHA-1.
"""

import base64
import hashlib
import json
import os
import urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

HERE = os.path.dirname(os.path.abspath(__file__))

NOW = 1_750_000_000
PA_AUD = "pactd-audience-7f3a"
PA_ISS = "https://pa.example.com"
PA_ES_KID = "pa-es-1"
PA_RS_KID = "pa-rs-1"
BRAND_ISS = "https://pactd.example/brands/acme"
BRAND_AUD = "https://pactd.example/a2a/acme"
FF = b"\xff"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def js(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def p256(seed: str):
    scalar = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    return ec.derive_private_key(scalar, ec.SECP256R1())


def sign(key, header: bytes, payload: bytes) -> str:
    signing_input = f"{b64(header)}.{b64(payload)}"
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signing_input}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def thumbprint(key) -> str:
    numbers = key.public_key().public_numbers()
    x = b64(numbers.x.to_bytes(32, "big"))
    y = b64(numbers.y.to_bytes(32, "big"))
    canonical = f'{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}'
    return b64(hashlib.sha256(canonical.encode()).digest())


def write(target: str, name: str, data: bytes) -> None:
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"seed-{name}")
    with open(path, "wb") as f:
        f.write(data)


def pa_jwt() -> None:
    key = p256("pactd-fuzz/pa-es256")
    good = {"iss": PA_ISS, "sub": "user-123", "aud": PA_AUD, "iat": NOW, "exp": NOW + 300, "jti": "j-1"}
    es = {"alg": "ES256", "kid": PA_ES_KID}
    rs = {"alg": "RS256", "kid": PA_RS_KID}
    # Mode 0: compact tokens.
    write("pa_jwt", "raw-valid-es256", b"\x00" + sign(key, js(es), js(good)).encode())
    write("pa_jwt", "raw-valid-no-kid", b"\x00" + sign(key, js({"alg": "ES256"}), js(good)).encode())
    write("pa_jwt", "raw-nbf", b"\x00" + sign(key, js(es), js({**good, "nbf": NOW - 10})).encode())
    write("pa_jwt", "raw-aud-array", b"\x00" + sign(key, js(es), js({**good, "aud": [PA_AUD]})).encode())
    write("pa_jwt", "raw-alg-none", b"\x00" + f"{b64(js({'alg': 'none'}))}.{b64(js(good))}.".encode())
    write("pa_jwt", "raw-rs256", b"\x00" + f"{b64(js(rs))}.{b64(js(good))}.{b64(bytes(256))}".encode())
    # Mode 1: header JSON 0xFF payload JSON, signed by the harness.
    variants = {
        "good": good,
        "expired": {**good, "iat": NOW - 400, "exp": NOW - 100},
        "too-long": {**good, "exp": NOW + 301},
        "future": {**good, "iat": NOW + 60, "exp": NOW + 120},
        "no-sub": {k: v for k, v in good.items() if k != "sub"},
        "float-exp": {**good, "exp": NOW + 299.5},
        "nbf-future": {**good, "nbf": NOW + 100},
        "jti-number": {**good, "jti": 7},
    }
    for name, claims in variants.items():
        write("pa_jwt", f"pair-{name}", b"\x01" + js(es) + FF + js(claims))
    write("pa_jwt", "pair-rs256", b"\x01" + js(rs) + FF + js(good))
    write("pa_jwt", "pair-crit", b"\x01" + js({**es, "crit": ["exp"]}) + FF + js(good))
    write("pa_jwt", "pair-dup-aud", b"\x01" + js(es) + FF + b'{"iss":"%s","sub":"u","aud":"x","aud":"%s","iat":%d,"exp":%d}' % (PA_ISS.encode(), PA_AUD.encode(), NOW, NOW + 60))
    # Mode 2: structured, any bytes.
    write("pa_jwt", "structured-a", b"\x02" + bytes(range(64)))
    write("pa_jwt", "structured-b", b"\x03" + bytes(range(255, 127, -1)))


def delegation_token() -> None:
    current = p256("pactd-fuzz/provider-current")
    old = p256("pactd-fuzz/provider-old")
    claims = {
        "iss": BRAND_ISS, "aud": BRAND_AUD, "sub": "user-1", "client_id": PA_ISS,
        "scope": "orders:read orders:cancel", "grant_id": "0b7e6f1c-3a4d-4c8e-9f2a-1d5e6f7a8b9c",
        "iat": NOW - 60, "exp": NOW + 840, "jti": "jti-1",
    }
    with_details = {**claims, "authorization_details": [{"type": "order_cancellation", "order_ids": ["DEMO-1"]}]}
    hdr = lambda key, typ="at+jwt": {"alg": "ES256", "typ": typ, "kid": thumbprint(key)}
    write("delegation_token", "raw-valid", b"\x00" + sign(current, js(hdr(current)), js(claims)).encode())
    write("delegation_token", "raw-valid-old-key", b"\x00" + sign(old, js(hdr(old)), js(claims)).encode())
    write("delegation_token", "raw-details", b"\x00" + sign(current, js(hdr(current)), js(with_details)).encode())
    write("delegation_token", "raw-receipt-typ", b"\x00" + sign(current, js(hdr(current, "pact-receipt+jws")), js(claims)).encode())
    write("delegation_token", "raw-wrong-kid", b"\x00" + sign(current, js(hdr(old)), js(claims)).encode())
    # Mode 1: payload signed by sign_compact (0x01 current key, 0x81 old key).
    write("delegation_token", "payload-valid", b"\x01" + js(claims))
    write("delegation_token", "payload-valid-old", b"\x81" + js(with_details))
    write("delegation_token", "payload-aud-array", b"\x01" + js({**claims, "aud": [BRAND_AUD]}))
    write("delegation_token", "payload-expired", b"\x01" + js({**claims, "iat": NOW - 4000, "exp": NOW - 400}))
    write("delegation_token", "payload-too-long", b"\x01" + js({**claims, "exp": NOW - 60 + 3601}))
    write("delegation_token", "payload-other-client", b"\x01" + js({**claims, "client_id": "https://evil.example"}))
    write("delegation_token", "payload-nbf", b"\x01" + js({**claims, "nbf": NOW + 100}))
    write("delegation_token", "payload-empty-jti", b"\x01" + js({**claims, "jti": ""}))
    # Mode 2: header 0xFF payload, signed with the current key.
    write("delegation_token", "pair-valid", b"\x02" + js(hdr(current)) + FF + js(claims))
    write("delegation_token", "pair-crit", b"\x02" + js({**hdr(current), "crit": ["x"]}) + FF + js(claims))
    write("delegation_token", "pair-no-typ", b"\x02" + js({"alg": "ES256", "kid": thumbprint(current)}) + FF + js(claims))
    # Mode 3: structured.
    write("delegation_token", "structured-a", b"\x03" + bytes(range(64)))


def oauth_form() -> None:
    details = json.dumps([{"type": "order_cancellation", "order_ids": ["DEMO-1", "DEMO-2"]}])
    forms = {
        "device-authorization": {"client_id": PA_ISS, "scope": "orders:read orders:cancel"},
        "device-authorization-details": {"client_id": PA_ISS, "scope": "orders:cancel", "authorization_details": details},
        "token-device-code": {
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
            "device_code": "q2VHcI5mX0kKxkqGQvQHbq4o1p7i0sVh3JtL2m9bR6E",
            "client_id": PA_ISS,
        },
        "token-refresh": {"grant_type": "refresh_token", "refresh_token": "rt_4f9a8b7c6d5e", "client_id": PA_ISS},
        "revoke": {"token": "rt_4f9a8b7c6d5e", "token_type_hint": "refresh_token"},
    }
    for name, form in forms.items():
        write("oauth_form", name, urllib.parse.urlencode(form).encode())
    write("oauth_form", "repeated", b"scope=a&scope=b")
    write("oauth_form", "empty-values", b"client_id=&scope=x+y&=z&&a")
    write("oauth_form", "percent", b"client_id=https%3A%2F%2Fpa.example.com&scope=%E2%9C%93%00%FF")


def user_code() -> None:
    for i, text in enumerate(["BCDF-GHJK", "bcdfghjk", " BCDF GHJK ", "b-c-d-f-g-h-j-k",
                              "WXZB-QRST", "ABCD-EFGH", "BCDF-GHJ", "BCDF\tGHJK\u3000", "ＢＣＤＦ-ＧＨＪＫ"]):
        write("user_code", str(i), text.encode())


def a2a_message() -> None:
    base = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Where is my order DEMO-1?"}]}
    messages = {
        "simple": {"message": base},
        "context": {"message": {**base, "contextId": "ctx-7"}, "configuration": {"blocking": True}, "metadata": {}},
        "two-parts": {"message": {**base, "parts": [{"text": "Cancel"}, {"text": "DEMO-2", "metadata": {}}]}},
        "task-id": {"message": {**base, "taskId": "t-1"}},
        "data-part": {"message": {**base, "parts": [{"data": {"a": 1}}]}},
        "agent-role": {"message": {**base, "role": "ROLE_AGENT"}},
        "blank": {"message": {**base, "parts": [{"text": "  \n"}]}},
        "null-context": {"message": {**base, "contextId": None, "taskId": None}},
    }
    for name, body in messages.items():
        write("a2a_message", name, js(body))
    write("a2a_message", "not-json", b'{"message": ')


def authz_details() -> None:
    valid = [{"type": "order_cancellation", "order_ids": ["DEMO-1", "DEMO-2"]}]
    two = [{"type": "order_cancellation", "order_ids": ["DEMO-1"]},
           {"type": "order_cancellation", "order_ids": ["DEMO-3"]}]
    write("authz_details", "valid", b"\x00" + js(valid))
    write("authz_details", "two-entries", b"\x01" + js(two))
    write("authz_details", "no-scope", b"\x02" + js(valid))
    write("authz_details", "extra-field", b"\x00" + js([{**valid[0], "amount": "1"}]))
    write("authz_details", "unknown-type", b"\x00" + js([{"type": "payment", "amount": "1"}]))
    write("authz_details", "empty-ids", b"\x00" + js([{"type": "order_cancellation", "order_ids": []}]))
    settings = {"authorization_details_types": {
        "payment": {
            "scope": "orders:read", "description": "Pay at most {amount} to {payees}",
            "fields": {"amount": {"type": "string", "required": True}, "payees": {"type": "string_array"}},
            "enforce": [{"tool": "pay", "arg": "to", "field": "payees"}],
        },
        "order_cancellation": {
            "scope": "orders:cancel", "fields": {"order_ids": {"type": "string_array", "required": True}},
        },
    }}
    write("authz_details", "custom-types", b"\x81" + js(settings) + FF
          + js([{"type": "payment", "amount": "10", "payees": ["a", "b"]}, {"type": "order_cancellation", "order_ids": ["X"]}]))


if __name__ == "__main__":
    pa_jwt()
    delegation_token()
    oauth_form()
    user_code()
    a2a_message()
    authz_details()

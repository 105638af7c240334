#!/usr/bin/env python3
"""Example Shop: a merchant's own agent and order API behind pactd.

Python 3 standard library only, so it runs from a fresh clone:

    MERCHANT_WEBHOOK_SECRET=whsec_... python3 examples/merchant/merchant.py --port 8787

One process serves three things (see docs/merchant-agent.md for the wire format):

  POST /pact                 the agent: pactd sends each verified turn here
  POST /tools/lookup-orders  the order API's "look up orders" (scope orders:read)
  POST /tools/cancel-order   the order API's "cancel an order" (scope orders:cancel,
                             limited by the authorization_details field order_ids)
  GET  /stats                counters, so tests can check what really happened

Every POST from pactd is signed the Standard Webhooks way; anything with a
missing, wrong or stale signature, or a webhook-id seen before within the
tolerance window (a replay), is refused with 401 before it is read. The
signed body names what it is and where it was sent ("type", "tool", "url"):
each endpoint accepts only its own, so a call pactd signed for one tool
cannot be replayed to another (a captured lookup_orders call sent to
/tools/cancel-order is refused with 403).
The agent acts only through pactd's tool gateway (the tools URL and turn
token in the turn), never by calling its own API directly, so pactd enforces
what the person allowed.

Test hooks in the turn text (for pactd's integration tests): "#slow" waits
3 s before answering, "#wait" waits 1 s, "#big" answers with 100 KiB.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Standard Webhooks: refuse timestamps further than this from our clock (replays).
TOLERANCE_SECS = 5 * 60
MAX_BODY = 256 * 1024

# Each endpoint: the request type it accepts and, for tools, the tool name.
ENDPOINTS = {
    "/pact": ("pact.turn", None),
    "/tools/lookup-orders": ("pact.tool_call", "lookup_orders"),
    "/tools/cancel-order": ("pact.tool_call", "cancel_order"),
}

ORDERS = [
    {"order_id": "SHOP-1001", "items": "Espresso machine", "status": "processing"},
    {"order_id": "SHOP-1002", "items": "Coffee beans, 1 kg", "status": "shipped"},
]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.agent_calls = 0
        self.turns = {}          # messageId -> number of agent calls
        self.tool_calls = {}     # tool -> number of calls that reached the API
        self.cancellations = {}  # order id -> number of cancellations
        self.refused = 0         # requests refused for their signature
        self.replays = 0         # well-signed requests whose webhook-id was seen before
        self.misdirected = 0     # well-signed requests meant for another endpoint

    def snapshot(self):
        with self.lock:
            return {
                "agent_calls": self.agent_calls,
                "turns": dict(self.turns),
                "tool_calls": dict(self.tool_calls),
                "cancellations": dict(self.cancellations),
                "refused_signatures": self.refused,
                "refused_replays": self.replays,
                "refused_misdirected": self.misdirected,
            }


STATS = Stats()


def secret_key(whsec):
    """The HMAC key is the base64-decoded part after `whsec_`."""
    if not whsec.startswith("whsec_"):
        raise ValueError("the secret must start with whsec_")
    return base64.b64decode(whsec[len("whsec_"):])


class SeenIds:
    """The webhook-ids accepted within the tolerance window: a request that
    carries one again is a replay (Standard Webhooks, "Webhook headers")."""

    def __init__(self):
        self.lock = threading.Lock()
        self.expiry = {}  # webhook-id -> when it can be forgotten

    def first_time(self, msg_id, now):
        with self.lock:
            for k in [k for k, exp in self.expiry.items() if exp < now]:
                del self.expiry[k]
            if msg_id in self.expiry:
                return False
            # Twice the window: a timestamp may be up to TOLERANCE_SECS ahead.
            self.expiry[msg_id] = now + 2 * TOLERANCE_SECS
            return True


SEEN = SeenIds()


def verify(keys, headers, body, now=None):
    """Standard Webhooks verification; True when one signature matches."""
    msg_id = headers.get("webhook-id")
    ts = headers.get("webhook-timestamp")
    sigs = headers.get("webhook-signature")
    if not msg_id or not ts or not sigs:
        return False
    try:
        ts_int = int(ts)
    except ValueError:
        return False
    now = int(time.time()) if now is None else now
    if abs(now - ts_int) > TOLERANCE_SECS:
        return False
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    for key in keys:
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        for sig in sigs.split(" "):
            version, _, value = sig.partition(",")
            if version == "v1" and hmac.compare_digest(value, expected):
                return True
    return False


def meant_for(msg, base_url, path):
    """The signed body names this endpoint: its type, its tool and the URL
    pactd sent it to (issue 28 of pactd: without this, a signed call for one
    tool could be replayed to another)."""
    kind, tool = ENDPOINTS[path]
    if not isinstance(msg, dict) or msg.get("type") != kind:
        return False
    if tool is not None and msg.get("tool") != tool:
        return False
    return msg.get("url") == base_url + path


def call_tool(tools, name, args):
    """POST {tools.url}/{name} with the turn token: (status, JSON body)."""
    req = urllib.request.Request(
        tools["url"] + "/" + name,
        data=json.dumps(args).encode(),
        headers={"Authorization": "Bearer " + tools["token"], "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=15) as res:
            return res.status, json.loads(res.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, None


ORDER_ID = re.compile(r"\b([a-z]+-\d+)\b", re.IGNORECASE)


def decide(turn):
    """The agent's whole brain: a reply to the turn's text."""
    text = turn["turn"]["text"]
    lower = text.lower()
    tools = turn["tools"]
    if "#slow" in lower:
        time.sleep(3)
    if "#wait" in lower:
        time.sleep(1)
    if "#big" in lower:
        return "x" * (100 * 1024)
    match = ORDER_ID.search(text)
    if "cancel" in lower and match:
        order_id = match.group(1).upper()
        status, body = call_tool(tools, "cancel_order", {"order_id": order_id})
        if status == 200 and body and body.get("cancelled"):
            return "Order %s is cancelled. You won't be charged." % order_id
        if status == 200:
            return "Order %s can't be cancelled: %s." % (order_id, (body or {}).get("reason", "unknown"))
        if status == 403 and body and body.get("error") == "missing_scope":
            # pactd turns this turn's reply into a step-up request anyway.
            return "I need your permission to cancel orders first."
        if status == 403:
            return "The permission you gave doesn't cover order %s, so I can't cancel it." % order_id
        return "Sorry, I couldn't reach our order system just now."
    if "order" in lower:
        status, body = call_tool(tools, "lookup_orders", {})
        if status == 200:
            lines = ["%s (%s): %s" % (o["order_id"], o["items"], o["status"]) for o in body["orders"]]
            return "Your orders:\n" + "\n".join(lines) if lines else "You have no orders with us."
        if status == 403 and body and body.get("error") == "missing_scope":
            return "I need your permission to see your orders first."
        return "Sorry, I couldn't reach our order system just now."
    if "open" in lower or "hour" in lower:
        return "Example Shop is open Monday to Friday, 9:00 to 17:00."
    return "Hello from Example Shop! I can tell you our opening hours or help with your orders."


class Handler(BaseHTTPRequestHandler):
    server_version = "ExampleShop/1"
    keys = []
    # Our own URL as pactd calls it (--public-url): the signed "url" must be ours.
    base_url = ""

    def log_message(self, fmt, *args):  # quiet: tests read stdout for the port
        sys.stderr.write("merchant: " + (fmt % args) + "\n")

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/stats":
            return self.reply(200, STATS.snapshot())
        return self.reply(404, {"error": "not_found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.reply(413, {"error": "too_large"})
        body = self.rfile.read(length)
        if self.path not in ENDPOINTS:
            return self.reply(404, {"error": "not_found"})
        # Verify the raw bytes before parsing anything.
        if not verify(self.keys, self.headers, body):
            with STATS.lock:
                STATS.refused += 1
            return self.reply(401, {"error": "bad_signature"})
        # Once per webhook-id within the window: a replay changes nothing.
        if not SEEN.first_time(self.headers.get("webhook-id"), int(time.time())):
            with STATS.lock:
                STATS.replays += 1
            return self.reply(401, {"error": "replayed"})
        try:
            msg = json.loads(body)
        except ValueError:
            return self.reply(400, {"error": "not_json"})
        # Signed for this endpoint, or refused before anything happens.
        if not meant_for(msg, self.base_url, self.path):
            with STATS.lock:
                STATS.misdirected += 1
            return self.reply(403, {"error": "not_for_this_endpoint"})
        if self.path == "/pact":
            with STATS.lock:
                STATS.agent_calls += 1
                mid = msg["turn"]["messageId"]
                STATS.turns[mid] = STATS.turns.get(mid, 0) + 1
            return self.reply(200, {"reply": decide(msg)})
        if self.path == "/tools/lookup-orders":
            self.count_tool("lookup_orders")
            return self.reply(200, {"orders": ORDERS, "user": msg.get("userId")})
        if self.path == "/tools/cancel-order":
            self.count_tool("cancel_order")
            order_id = (msg.get("args") or {}).get("order_id")
            if order_id not in [o["order_id"] for o in ORDERS]:
                return self.reply(200, {"cancelled": False, "reason": "not_found"})
            with STATS.lock:
                STATS.cancellations[order_id] = STATS.cancellations.get(order_id, 0) + 1
            return self.reply(200, {"cancelled": True, "order_id": order_id})
        return self.reply(404, {"error": "not_found"})

    def count_tool(self, name):
        with STATS.lock:
            STATS.tool_calls[name] = STATS.tool_calls.get(name, 0) + 1


def main():
    p = argparse.ArgumentParser(description="Example Shop, a merchant behind pactd")
    p.add_argument("--port", type=int, default=int(os.environ.get("MERCHANT_PORT", "8787")),
                   help="port on 127.0.0.1 (0: any free port) [env MERCHANT_PORT, default 8787]")
    p.add_argument("--secret", default=os.environ.get("MERCHANT_WEBHOOK_SECRET"),
                   help="the whsec_... pactd printed (several: comma-separated) [env MERCHANT_WEBHOOK_SECRET]")
    p.add_argument("--public-url", default=os.environ.get("MERCHANT_PUBLIC_URL"),
                   help="this server's base URL as registered with pactd, e.g. https://shop.example "
                        "[env MERCHANT_PUBLIC_URL, default http://127.0.0.1:PORT]")
    a = p.parse_args()
    if not a.secret:
        p.error("give the webhook secret: --secret whsec_... or MERCHANT_WEBHOOK_SECRET")
    Handler.keys = [secret_key(s.strip()) for s in a.secret.split(",") if s.strip()]
    httpd = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    httpd.daemon_threads = True
    Handler.base_url = (a.public_url or "http://127.0.0.1:%d" % httpd.server_address[1]).rstrip("/")
    print("listening on port %d" % httpd.server_address[1], flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

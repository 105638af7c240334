#!/usr/bin/env python3
"""Example Booking: a merchant's own agent and booking API behind pactd.

Python 3 standard library only, so it runs from a fresh clone:

    MERCHANT_WEBHOOK_SECRET=whsec_... python3 examples/booking/booking.py --port 8788

One process serves (see docs/merchant-agent.md, section 6, for the set-up):

  POST /pact                 the agent: pactd sends each verified turn here
  POST /tools/find-booking   "find your bookings"               (scope bookings:read)
  POST /tools/quote-change   "what moving booking X to D costs" (scope bookings:read)
  POST /tools/move-booking   "move booking X to D for fee F"    (scope bookings:change,
                             limited by the booking_change details type)
  GET  /stats                counters, so tests can check what really happened

Every POST from pactd is verified exactly as examples/merchant/merchant.py
does it (Standard Webhooks signature, timestamp tolerance, each webhook-id
once, and the signed "type", "tool" and "url" naming this endpoint).

move_booking is the merchant's own last line of defence: it works out the
fee itself and refuses to charge more than the call's `fee`, or more than
the limits pactd signed into the call (`limits`: the person's "no extra
charge"). What it did charge it declares in `pactEffect`, so pactd can hold
it to the limits and put it in the person's receipt.

The agent, for "move booking K7PQ2M to Tuesday": asks quote_change for the
fee, then calls move_booking with it. pactd answers 403 beyond_limit when
the fee is more than the person allowed; the turn then becomes a question
to the person ("Allow this, once?") whatever the agent replies, and once
they allow it the same call, retried, goes through once.

Test hooks in the turn text (for pactd's integration tests): "#nofee" moves
without asking for a quote first (a careless agent: the booking API's own
check must catch it). --today YYYY-MM-DD fixes the agent's "today", so that
"Tuesday" means the same day in every run.
"""

import argparse
import base64
import datetime
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
    "/tools/find-booking": ("pact.tool_call", "find_booking"),
    "/tools/quote-change": ("pact.tool_call", "quote_change"),
    "/tools/move-booking": ("pact.tool_call", "move_booking"),
}

# The extra charge for a move, by the new date's weekday (Monday = 0), in
# cents: Tuesdays and Fridays are busy, weekends busier. Money is kept in
# minor units (ISO 4217: EUR has 2 digits), never as floating point.
FEE_CENTS = {1: 1500, 4: 1500, 5: 2500, 6: 2500}
CURRENCY = "EUR"

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


class Store:
    """The bookings and what happened to them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bookings = {
            "K7PQ2M": {"booking_id": "K7PQ2M", "what": "Berlin to Prague, 08:12", "date": "2026-12-04",
                       "status": "confirmed"},
            "X9LR4T": {"booking_id": "X9LR4T", "what": "Prague to Vienna, 14:40", "date": "2026-11-28",
                       "status": "travelled"},
        }
        self.agent_calls = 0
        self.turns = {}          # messageId -> number of agent calls
        self.tool_calls = {}     # tool -> number of calls that reached the API
        self.moves = []          # [booking_id, new_date, fee charged] of every move made
        self.refused_moves = {}  # our own refusal code -> count
        self.refused = 0         # requests refused for their signature
        self.replays = 0         # well-signed requests whose webhook-id was seen before
        self.misdirected = 0     # well-signed requests meant for another endpoint

    def snapshot(self):
        with self.lock:
            return {
                "agent_calls": self.agent_calls,
                "turns": dict(self.turns),
                "tool_calls": dict(self.tool_calls),
                "moves": [list(m) for m in self.moves],
                "bookings": {k: dict(v) for k, v in self.bookings.items()},
                "refused_moves": dict(self.refused_moves),
                "refused_signatures": self.refused,
                "refused_replays": self.replays,
                "refused_misdirected": self.misdirected,
            }


STORE = Store()


# ------------------------------------------------------------ money and dates

def cents_of(amount):
    """`{"currency": "EUR", "amount": "15.00"}` -> 1500, or None when it is
    not a plain decimal string of EUR with at most 2 digits after the point."""
    if not isinstance(amount, dict) or amount.get("currency") != CURRENCY:
        return None
    text = amount.get("amount")
    if not isinstance(text, str) or not re.fullmatch(r"\d{1,9}(\.\d{1,2})?", text):
        return None
    whole, _, frac = text.partition(".")
    return int(whole) * 100 + int((frac + "00")[:2])


def money(cents):
    return {"currency": CURRENCY, "amount": "%d.%02d" % (cents // 100, cents % 100)}


def shown(cents):
    return "€%d.%02d" % (cents // 100, cents % 100)


def parse_day(s):
    try:
        return datetime.date.fromisoformat(s) if isinstance(s, str) and len(s) == 10 else None
    except ValueError:
        return None


def day_words(d):
    return d.strftime("%a ") + str(d.day) + d.strftime(" %b %Y")


def fee_for(new_date):
    return FEE_CENTS.get(new_date.weekday(), 0)


# ------------------------------------------------------------ Standard Webhooks

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
    pactd sent it to (without this, a signed call for one tool could be
    replayed to another: a quote replayed as a move)."""
    kind, tool = ENDPOINTS[path]
    if not isinstance(msg, dict) or msg.get("type") != kind:
        return False
    if tool is not None and msg.get("tool") != tool:
        return False
    return msg.get("url") == base_url + path


# ------------------------------------------------------------ the booking API

# Which argument of move_booking each field of the booking_change type
# limits: the same pairs as the tool's rules in pactd (`--enforce`).
FIELD_ARG = {"booking_ids": "booking_id", "new_date": "new_date", "max_fee": "fee"}


def within_limits(limits, args, fee_cents):
    """The merchant's own check of the limits pactd signed into the call
    (PACT §5.7: the limits reach the system that changes the record). The
    fee it would really charge, not the one asked for, must fit every amount
    limit. None when all hold, else what is wrong."""
    if not isinstance(limits, list):
        return "unreadable limits"
    for lim in limits:
        if not isinstance(lim, dict):
            return "unreadable limits"
        kind, value = lim.get("kind"), lim.get("limit")
        if kind == "operation":
            # Allowed once by the person, for exactly these amounts.
            allowed = [cents_of(a) for a in lim.get("amounts") or []]
            if not any(a is not None and fee_cents <= a for a in allowed):
                return "the fee %s is more than the person allowed for this move" % shown(fee_cents)
            continue
        arg = FIELD_ARG.get(lim.get("field"))
        if kind == "amount":
            cap = cents_of(value)
            if cap is None or fee_cents > cap:
                return "the fee %s is more than the %s the person allowed" % (
                    shown(fee_cents), shown(cap) if cap is not None else "amount")
        elif kind == "string_array":
            if not isinstance(value, list) or args.get(arg) not in value:
                return "booking %s is not one the person allowed" % args.get(arg)
        elif kind == "date_window":
            day = parse_day(args.get(arg))
            lo = parse_day((value or {}).get("from")) if isinstance(value, dict) else None
            hi = parse_day((value or {}).get("to")) if isinstance(value, dict) else None
            if day is None or lo is None or hi is None or not lo <= day <= hi:
                return "the new date is outside the dates the person allowed"
        elif kind == "count":
            continue  # counted by pactd; nothing to check per call
        else:
            # A limit we do not understand: refuse rather than guess (fail closed).
            return "a limit of kind %r this service cannot check" % kind
    return None


def refuse(handler, status, code, message):
    with STORE.lock:
        STORE.refused_moves[code] = STORE.refused_moves.get(code, 0) + 1
    return handler.reply(status, {"error": code, "message": message})


def find_booking(msg):
    args = msg.get("args") or {}
    with STORE.lock:
        found = [dict(b) for b in STORE.bookings.values()
                 if args.get("booking_id") in (None, b["booking_id"])]
    return 200, {"bookings": found, "user": msg.get("userId")}


def quote_change(msg):
    args = msg.get("args") or {}
    day = parse_day(args.get("new_date"))
    with STORE.lock:
        booking = STORE.bookings.get(args.get("booking_id"))
    if booking is None:
        return 404, {"error": "unknown_booking", "message": "There is no booking %s" % args.get("booking_id")}
    if day is None:
        return 400, {"error": "bad_date", "message": "new_date must be a date like 2026-12-08"}
    return 200, {"booking_id": booking["booking_id"], "new_date": day.isoformat(), "fee": money(fee_for(day))}


def move_booking(handler, msg):
    """Moves a booking, never charging more than the call's fee or the
    signed limits allow; declares what it charged (`pactEffect`)."""
    args = msg.get("args") or {}
    booking_id = args.get("booking_id")
    day = parse_day(args.get("new_date"))
    offered = cents_of(args.get("fee"))
    if day is None or offered is None:
        return refuse(handler, 400, "bad_arguments",
                      "move_booking needs booking_id, new_date (YYYY-MM-DD) and fee {currency: EUR, amount}")
    fee = fee_for(day)
    with STORE.lock:
        booking = STORE.bookings.get(booking_id)
        status = booking and booking["status"]
    if booking is None:
        return refuse(handler, 404, "unknown_booking", "There is no booking %s" % booking_id)
    if status != "confirmed":
        return refuse(handler, 409, "already_travelled",
                      "Booking %s has been travelled on and cannot be moved" % booking_id)
    why = within_limits(msg.get("limits"), args, fee)
    if why is not None:
        return refuse(handler, 403, "over_limit",
                      "Cannot move %s to %s: %s" % (booking_id, day_words(day), why))
    if fee > offered:
        return refuse(handler, 409, "fee_changed",
                      "Moving %s to %s costs %s, not %s: ask for a new quote" % (
                          booking_id, day_words(day), shown(fee), shown(offered)))
    with STORE.lock:
        STORE.bookings[booking_id]["date"] = day.isoformat()
        STORE.moves.append([booking_id, day.isoformat(), money(fee)["amount"]])
    return handler.reply(200, {
        "moved": True,
        "booking_id": booking_id,
        "new_date": day.isoformat(),
        "fee": money(fee),
        # The documented field (docs/merchant-agent.md): what this call really did.
        "pactEffect": {"amount": money(fee)},
    })


# ------------------------------------------------------------ the agent

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


# A booking code: six capitals and digits, with at least one of each.
BOOKING_ID = re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])([A-Z0-9]{6})\b")
ISO_DAY = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


def wanted_day(lower, today):
    """The date the person means: an ISO date, or the next such weekday after today."""
    iso = ISO_DAY.search(lower)
    if iso:
        return parse_day(iso.group(1))
    for i, name in enumerate(WEEKDAYS):
        if name in lower:
            ahead = (i - today.weekday()) % 7 or 7
            return today + datetime.timedelta(days=ahead)
    return None


def refusal_words(status, body, what):
    """A refusal from pactd or from our own API, in words for the person."""
    body = body if isinstance(body, dict) else {}
    error = body.get("error")
    if status == 403 and error == "missing_scope":
        # pactd turns this turn's reply into a step-up request anyway.
        return "I need your permission to %s first." % what
    if status == 403 and error == "beyond_limit":
        # pactd turns this into a question to the person about this one move.
        return "That needs your OK first: %s." % (body.get("error_description") or "it goes beyond a limit")
    if status == 424 and error == "tool_error":
        # Our booking system said no, in its own words (pactd passes them on).
        return "Our booking system said no: %s." % (body.get("message") or body.get("code"))
    if status == 403:
        return "The permission you gave doesn't cover that, so I can't %s." % what
    return "Sorry, I couldn't reach our booking system just now."


def move(tools, text, today):
    lower = text.lower()
    match = BOOKING_ID.search(text)
    day = wanted_day(lower, today)
    if not match or day is None:
        return "Which booking, and to which day? For example: move booking K7PQ2M to Tuesday."
    booking_id = match.group(1)
    if "#nofee" in lower:
        fee = money(0)
    else:
        status, quote = call_tool(tools, "quote_change", {"booking_id": booking_id, "new_date": day.isoformat()})
        if status != 200:
            return refusal_words(status, quote, "look at your bookings")
        fee = quote["fee"]
    args = {"booking_id": booking_id, "new_date": day.isoformat(), "fee": fee}
    status, body = call_tool(tools, "move_booking", args)
    if status == 200 and isinstance(body, dict) and body.get("moved"):
        charged = body.get("fee") or fee
        extra = "no extra charge" if cents_of(charged) == 0 else "extra charge " + shown(cents_of(charged) or 0)
        return "Booking %s is moved to %s (%s)." % (booking_id, day_words(day), extra)
    return refusal_words(status, body, "change your bookings")


def decide(turn, today):
    """The agent's whole brain: a reply to the turn's text."""
    text = turn["turn"]["text"]
    lower = text.lower()
    tools = turn["tools"]
    if "move" in lower or "rebook" in lower:
        return move(tools, text, today)
    if "booking" in lower:
        status, body = call_tool(tools, "find_booking", {})
        if status != 200:
            return refusal_words(status, body, "see your bookings")
        lines = ["%s (%s): %s, %s" % (b["booking_id"], b["what"], b["date"], b["status"])
                 for b in body["bookings"]]
        return "Your bookings:\n" + "\n".join(lines) if lines else "You have no bookings with us."
    if "open" in lower or "hour" in lower:
        return "Example Booking answers every day, 7:00 to 22:00."
    return "Hello from Example Booking! I can show your bookings or move one to another day."


class Handler(BaseHTTPRequestHandler):
    server_version = "ExampleBooking/1"
    keys = []
    # Our own URL as pactd calls it (--public-url): the signed "url" must be ours.
    base_url = ""
    today = None  # --today, else the date now (UTC)

    def log_message(self, fmt, *args):  # quiet: tests read stdout for the port
        sys.stderr.write("booking: " + (fmt % args) + "\n")

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/stats":
            return self.reply(200, STORE.snapshot())
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
            with STORE.lock:
                STORE.refused += 1
            return self.reply(401, {"error": "bad_signature"})
        # Once per webhook-id within the window: a replay changes nothing.
        if not SEEN.first_time(self.headers.get("webhook-id"), int(time.time())):
            with STORE.lock:
                STORE.replays += 1
            return self.reply(401, {"error": "replayed"})
        try:
            msg = json.loads(body)
        except ValueError:
            return self.reply(400, {"error": "not_json"})
        # Signed for this endpoint, or refused before anything happens.
        if not meant_for(msg, self.base_url, self.path):
            with STORE.lock:
                STORE.misdirected += 1
            return self.reply(403, {"error": "not_for_this_endpoint"})
        if self.path == "/pact":
            with STORE.lock:
                STORE.agent_calls += 1
                mid = msg["turn"]["messageId"]
                STORE.turns[mid] = STORE.turns.get(mid, 0) + 1
            today = self.today or datetime.datetime.now(datetime.timezone.utc).date()
            return self.reply(200, {"reply": decide(msg, today)})
        tool = ENDPOINTS[self.path][1]
        with STORE.lock:
            STORE.tool_calls[tool] = STORE.tool_calls.get(tool, 0) + 1
        if tool == "move_booking":
            return move_booking(self, msg)
        status, out = find_booking(msg) if tool == "find_booking" else quote_change(msg)
        return self.reply(status, out)


def main():
    p = argparse.ArgumentParser(description="Example Booking, a merchant behind pactd")
    p.add_argument("--port", type=int, default=int(os.environ.get("MERCHANT_PORT", "8788")),
                   help="port on 127.0.0.1 (0: any free port) [env MERCHANT_PORT, default 8788]")
    p.add_argument("--secret", default=os.environ.get("MERCHANT_WEBHOOK_SECRET"),
                   help="the whsec_... pactd printed (several: comma-separated) [env MERCHANT_WEBHOOK_SECRET]")
    p.add_argument("--public-url", default=os.environ.get("MERCHANT_PUBLIC_URL"),
                   help="this server's base URL as registered with pactd, e.g. https://booking.example "
                        "[env MERCHANT_PUBLIC_URL, default http://127.0.0.1:PORT]")
    p.add_argument("--today", default=os.environ.get("BOOKING_TODAY"),
                   help="the agent's today, YYYY-MM-DD (tests) [env BOOKING_TODAY, default: the UTC date]")
    a = p.parse_args()
    if not a.secret:
        p.error("give the webhook secret: --secret whsec_... or MERCHANT_WEBHOOK_SECRET")
    if a.today and parse_day(a.today) is None:
        p.error("--today takes a date like 2026-12-02")
    Handler.keys = [secret_key(s.strip()) for s in a.secret.split(",") if s.strip()]
    Handler.today = parse_day(a.today) if a.today else None
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

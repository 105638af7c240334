// Example Shop's order tools as an MCP server behind pactd (docs/mcp.md,
// "Connect your MCP server"). The same two tools as examples/merchant:
//
//   lookup_orders  the person's orders               (map it to orders:read)
//   cancel_order   cancel one order that has not shipped (map it to orders:cancel)
//
// Written with the official MCP TypeScript SDK (@modelcontextprotocol/sdk,
// locked in package-lock.json): an McpServer per session over the SDK's
// StreamableHTTPServerTransport (Streamable HTTP, answers as event streams).
//
//   cd examples/mcp-server && npm ci
//   MERCHANT_WEBHOOK_SECRET=whsec_... node server.mjs --port 8788
//
//   POST/DELETE /mcp   the MCP endpoint; pactd is its only client
//   GET /stats         counters, so tests can check what really happened
//
// Every request must come from pactd: before the SDK sees it, the
// `pact-context` header is verified the Standard Webhooks way with the
// brand's webhook secret (HMAC-SHA256 over "{webhook-id}.{webhook-timestamp}.
// {pact-context}"), the timestamp must be fresh, the webhook-id unseen, the
// context's bodySha256 must be the SHA-256 of the raw body, and its url must
// be this server's endpoint (--public-url): a request pactd signed for
// another server is refused. Each tool runs only for a context of type
// pact.mcp_call naming that very tool (remoteTool), so a signed call for
// lookup_orders cannot be turned into cancel_order. The tools then read the
// verified context to learn whom they act for (userId, the grant, its
// scopes). pactd has already checked the person's scopes and
// authorization_details; this server checks only what it knows itself.
//
// It prints "listening on port N" first, for the test harness.

import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const TOLERANCE_SECS = 5 * 60;
const MAX_BODY = 64 * 1024;

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

// Several secrets (comma-separated) while pactd's secret is being rotated.
const secrets = (arg('--secret', process.env.MERCHANT_WEBHOOK_SECRET) || '')
  .split(',')
  .map((s) => s.trim())
  .filter((s) => s.startsWith('whsec_'))
  .map((s) => Buffer.from(s.slice('whsec_'.length), 'base64'));
if (secrets.length === 0) {
  console.error('give the webhook secret: --secret whsec_... or MERCHANT_WEBHOOK_SECRET');
  process.exit(2);
}

const ORDERS = [
  { order_id: 'SHOP-1001', items: 'Espresso machine', status: 'processing' },
  { order_id: 'SHOP-1002', items: 'Coffee beans, 1 kg', status: 'shipped' },
];

// This server's endpoint as pactd calls it: the signed context must name it.
const PORT = Number(arg('--port', process.env.MCP_PORT ?? '8788'));
let endpoint = arg('--public-url', process.env.MERCHANT_PUBLIC_URL);

const stats = {
  tool_calls: {}, // tool -> calls that ran
  cancellations: {}, // order id -> cancellations
  calls: [], // per call: tool, userId, grantId, scopes, turnId, paIssuer
  lists: 0, // tools/list requests (imports)
  refused: 0, // requests refused before the SDK saw them
  misdirected: 0, // well-signed requests for another endpoint or tool
};

// webhook-id -> expiry: a replayed request is refused within the tolerance.
const seenIds = new Map();

// Standard Webhooks verification of the pact-context header; the context, or null.
function verify(headers, body) {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  const context = headers['pact-context'];
  if (!id || !ts || !sigs || !context || !/^\d+$/.test(ts)) return null;
  const now = Date.now() / 1000;
  if (Math.abs(now - Number(ts)) > TOLERANCE_SECS) return null;
  const signed = Buffer.from(`${id}.${ts}.${context}`);
  let ok = false;
  for (const key of secrets) {
    const expected = createHmac('sha256', key).update(signed).digest();
    for (const sig of sigs.split(' ')) {
      const [version, value] = sig.split(',');
      if (version !== 'v1' || !value) continue;
      const got = Buffer.from(value, 'base64');
      if (got.length === expected.length && timingSafeEqual(got, expected)) ok = true;
    }
  }
  if (!ok) return null;
  let ctx;
  try {
    ctx = JSON.parse(Buffer.from(context, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  // The signature covers the body through its hash.
  if (ctx.bodySha256 !== createHash('sha256').update(body).digest('base64url')) return null;
  // ... and the destination: signed for this endpoint, or not ours.
  if (ctx.url !== endpoint) {
    stats.misdirected += 1;
    return null;
  }
  for (const [k, exp] of seenIds) if (exp < now) seenIds.delete(k);
  if (seenIds.has(id)) return null;
  seenIds.set(id, now + 2 * TOLERANCE_SECS);
  return ctx;
}

// The verified context of the request a tool runs for (verify() ran before
// the SDK): a call pactd signed for this very tool, for a person.
function who(extra, tool) {
  const raw = extra.requestInfo?.headers?.['pact-context'];
  const ctx = JSON.parse(Buffer.from(String(raw), 'base64url').toString('utf8'));
  if (ctx.type !== 'pact.mcp_call' || ctx.remoteTool !== tool) {
    stats.misdirected += 1;
    throw new Error(`this request was not signed for ${tool}`);
  }
  if (!ctx.userId) {
    throw new Error('these tools act for a person: call them through pactd with a delegation');
  }
  return ctx;
}

function record(tool, ctx) {
  stats.tool_calls[tool] = (stats.tool_calls[tool] ?? 0) + 1;
  stats.calls.push({
    tool,
    userId: ctx.userId,
    grantId: ctx.grantId,
    scopes: ctx.scopes,
    turnId: ctx.turnId,
    paIssuer: ctx.paIssuer,
  });
}

function answer(value) {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
}

function shopServer() {
  const server = new McpServer({ name: 'example-shop-orders', version: '1.0.0' });
  server.registerTool(
    'lookup_orders',
    {
      description: "List the person's orders with their status",
      inputSchema: {},
    },
    async (_args, extra) => {
      const ctx = who(extra, 'lookup_orders');
      record('lookup_orders', ctx);
      return answer({ orders: ORDERS, user: ctx.userId });
    },
  );
  server.registerTool(
    'cancel_order',
    {
      description: 'Cancel one order that has not shipped',
      inputSchema: { order_id: z.string().regex(/^SHOP-[0-9]+$/) },
    },
    async ({ order_id }, extra) => {
      const ctx = who(extra, 'cancel_order');
      record('cancel_order', ctx);
      if (!ORDERS.some((o) => o.order_id === order_id)) {
        return answer({ cancelled: false, reason: 'not_found' });
      }
      stats.cancellations[order_id] = (stats.cancellations[order_id] ?? 0) + 1;
      return answer({ cancelled: true, order_id, user: ctx.userId });
    },
  );
  return server;
}

// Session id -> transport (the SDK's stateful mode).
const sessions = new Map();

function send(res, status, body) {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': data.length });
  res.end(data);
}

async function handle(req, res, body) {
  const ctx = verify(req.headers, body);
  if (!ctx) {
    stats.refused += 1;
    return send(res, 401, { error: 'bad_signature' });
  }
  const sid = req.headers['mcp-session-id'];
  if (req.method === 'DELETE') {
    const t = sid && sessions.get(sid);
    if (!t) return send(res, 404, { error: 'unknown_session' });
    return t.handleRequest(req, res);
  }
  let message;
  try {
    message = JSON.parse(body.toString('utf8'));
  } catch {
    return send(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
  }
  if (message?.method === 'tools/list') stats.lists += 1;
  let transport = sid ? sessions.get(sid) : undefined;
  if (sid && !transport) {
    return send(res, 404, { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } });
  }
  if (!transport) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await shopServer().connect(transport);
  }
  return transport.handleRequest(req, res, message);
}

const http = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') return send(res, 200, stats);
  if (req.url !== '/mcp' || !['POST', 'DELETE'].includes(req.method)) {
    return send(res, req.url === '/mcp' ? 405 : 404, { error: 'not_found' });
  }
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > MAX_BODY) req.destroy();
    else chunks.push(c);
  });
  req.on('end', () => {
    handle(req, res, Buffer.concat(chunks)).catch((e) => {
      if (!res.headersSent) send(res, 500, { error: String(e?.message ?? e) });
    });
  });
});

http.listen(PORT, '127.0.0.1', () => {
  endpoint = (endpoint ?? `http://127.0.0.1:${http.address().port}`).replace(/\/+$/, '') + '/mcp';
  console.log(`listening on port ${http.address().port}`);
});

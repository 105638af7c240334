// A merchant's brand agent that reaches its tools as an MCP client of pactd.
//
// It uses the official MCP TypeScript SDK (@modelcontextprotocol/sdk, locked
// in package-lock.json) exactly as published: a Client over the SDK's
// StreamableHTTPClientTransport, pointed at the turn's `tools.mcpUrl` with the
// turn token as its bearer token. Nothing of the SDK is patched or wrapped.
//
// A turn whose text says "#shared" goes instead through one Client kept for
// the process's whole life, on the brand's shared endpoint
// (`tools.brandMcpUrl`), as a long-running agent would keep its MCP
// connection: the SDK's documented `fetch` option puts the token of the turn
// being served on each request.
//
//   MERCHANT_WEBHOOK_SECRET=whsec_... node tests/mcp/brand-agent.mjs --port 0
//
//   POST /pact   pactd's signed turn (Standard Webhooks); answers {"reply": ...}
//   GET  /stats  what it saw: per messageId, the tools/list and each call's result
//
// It prints "listening on port N" first, for the test harness.

import { AsyncLocalStorage } from 'node:async_hooks';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const TOLERANCE_SECS = 5 * 60;

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const secrets = (process.env.MERCHANT_WEBHOOK_SECRET || '')
  .split(',')
  .map((s) => s.trim())
  .filter((s) => s.startsWith('whsec_'))
  .map((s) => Buffer.from(s.slice('whsec_'.length), 'base64'));
if (secrets.length === 0) {
  console.error('MERCHANT_WEBHOOK_SECRET=whsec_... is required');
  process.exit(2);
}

// Standard Webhooks: HMAC-SHA256 over "{id}.{timestamp}.{raw body}".
function verify(headers, body) {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  if (!id || !ts || !sigs || !/^\d+$/.test(ts)) return false;
  if (Math.abs(Date.now() / 1000 - Number(ts)) > TOLERANCE_SECS) return false;
  const signed = Buffer.concat([Buffer.from(`${id}.${ts}.`), body]);
  for (const key of secrets) {
    const expected = createHmac('sha256', key).update(signed).digest();
    for (const sig of sigs.split(' ')) {
      const [version, value] = sig.split(',');
      if (version !== 'v1' || !value) continue;
      const got = Buffer.from(value, 'base64');
      if (got.length === expected.length && timingSafeEqual(got, expected)) return true;
    }
  }
  return false;
}

const stats = { turns: {}, refusedSignatures: 0 };

// The token of the turn being served, for the shared client's requests.
const turnToken = new AsyncLocalStorage();
let shared = null;

// One client for every "#shared" turn, connected on the first one.
function sharedClient(turn) {
  if (!shared) {
    shared = (async () => {
      const client = new Client({ name: 'example-brand-agent', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(turn.tools.brandMcpUrl), {
        fetch: (url, init) => {
          const headers = new Headers(init?.headers);
          headers.set('Authorization', `Bearer ${turnToken.getStore()}`);
          return fetch(url, { ...init, headers });
        },
      });
      await client.connect(transport);
      return { client, transport };
    })().catch((e) => {
      shared = null;
      throw e;
    });
  }
  return shared;
}

async function perTurnClient(turn) {
  const client = new Client({ name: 'example-brand-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(turn.tools.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${turn.tools.token}` } },
  });
  await client.connect(transport);
  return { client, transport };
}

// The agent's brain: the turn text decides which tool it calls, and how.
function decide(turn, seen) {
  return turnToken.run(turn.tools.token, () => decideInTurn(turn, seen));
}

async function decideInTurn(turn, seen) {
  const text = turn.turn.text;
  const lower = text.toLowerCase();
  const isShared = text.includes('#shared');
  const { client, transport } = isShared ? await sharedClient(turn) : await perTurnClient(turn);
  try {
    seen.protocolVersion = transport.protocolVersion ?? null;
    seen.sessionId = transport.sessionId ?? null;
    const { tools } = await client.listTools();
    seen.tools = tools.map((t) => ({ name: t.name, grant: t._meta?.['pactd/grant'] ?? null }));
    const call = async (name, args) => {
      const result = await client.callTool({ name, arguments: args });
      seen.calls.push({ name, args, isError: result.isError === true, result });
      return result;
    };
    // "#call TOOL {json}" calls TOOL with exactly those arguments (for refusal tests).
    const raw = text.match(/#call (\w+) (\{.*\})/);
    if (raw) {
      const result = await call(raw[1], JSON.parse(raw[2]));
      return result.isError ? `refused: ${result.content[0].text}` : 'done';
    }
    const order = text.match(/\b([a-z]+-\d+)\b/i);
    if (lower.includes('cancel') && order) {
      const id = order[1].toUpperCase();
      const result = await call('cancel_order', { order_id: id });
      if (!result.isError && result.structuredContent?.cancelled) {
        return `Order ${id} is cancelled. You won't be charged.`;
      }
      if (result.structuredContent?.error === 'missing_scope') {
        return 'I need your permission to cancel orders first.';
      }
      if (result.structuredContent?.error === 'not_permitted') {
        return `The permission you gave doesn't cover order ${id}, so I can't cancel it.`;
      }
      return "Sorry, I couldn't reach our order system just now.";
    }
    if (lower.includes('order')) {
      const result = await call('lookup_orders', {});
      if (result.isError) return 'I need your permission to see your orders first.';
      const lines = result.structuredContent.orders.map(
        (o) => `${o.order_id} (${o.items}): ${o.status}`,
      );
      return `Your orders:\n${lines.join('\n')}`;
    }
    return 'Hello from Example Shop, over MCP.';
  } finally {
    // Ends a per-turn session (DELETE) and its transport; the shared one lives on.
    if (!isShared) {
      await transport.terminateSession().catch(() => {});
      await client.close();
    }
  }
}

function send(res, status, body) {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': data.length });
  res.end(data);
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') return send(res, 200, stats);
  if (req.method !== 'POST' || req.url !== '/pact') return send(res, 404, { error: 'not_found' });
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const body = Buffer.concat(chunks);
    if (!verify(req.headers, body)) {
      stats.refusedSignatures += 1;
      return send(res, 401, { error: 'bad_signature' });
    }
    const turn = JSON.parse(body);
    const seen = { calls: [], error: null };
    stats.turns[turn.turn.messageId] = seen;
    try {
      return send(res, 200, { reply: await decide(turn, seen) });
    } catch (e) {
      seen.error = String(e?.message ?? e);
      return send(res, 200, { reply: `The agent failed: ${seen.error}` });
    }
  });
});

server.listen(Number(arg('--port', '0')), '127.0.0.1', () => {
  console.log(`listening on port ${server.address().port}`);
});

// A personal agent written with the official A2A JavaScript SDK (@a2a-js/sdk,
// locked in package-lock.json), used as an agent developer would use it
// against pactd: resolve the card, pick a binding, add the PA-JWT (and the
// delegation token once there is one) in an interceptor, and follow a
// step-up task with Get Task. tests/it/a2a_sdk.rs runs it and checks every
// line it prints (one JSON object per line); docs/a2a-clients.md quotes it.
//
// Environment: A2A_CARD_URL (the brand's card), A2A_BINDING ("HTTP+JSON" or
// "JSONRPC"), PA_HELPER_URL (the test's loopback endpoint that mints a fresh
// PA-JWT for each call, as a personal agent signs its own: they are
// short-lived), PA_ISSUER (the PA's client_id).

import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { AgentCard, Message, Task } from "@a2a-js/sdk";

const cardUrl = process.env.A2A_CARD_URL;
const binding = process.env.A2A_BINDING;
const helper = process.env.PA_HELPER_URL;

function emit(step, value) {
  process.stdout.write(JSON.stringify({ step, ...value }) + "\n");
}

async function freshPaJwt() {
  const res = await fetch(`${helper}/pa-jwt`);
  return res.text();
}

// [doc:interceptor]
// The PA-JWT goes in Authorization on every call; the delegation token, once
// the person granted one, in X-A2A-User-Delegation (pactd's card says so in
// its userDelegation scheme). An OAuth2 scheme on the card would make a
// generic interceptor send it as Authorization instead, so it is set here.
class PactAuth {
  constructor() {
    this.delegation = undefined;
  }
  async before(args) {
    const headers = args.options.serviceParameters;
    headers["Authorization"] = `Bearer ${await freshPaJwt()}`;
    if (this.delegation) {
      headers["X-A2A-User-Delegation"] = `Bearer ${this.delegation}`;
    }
  }
  async after() {}
}
// [/doc:interceptor]

// [doc:client]
const auth = new PactAuth();
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new RestTransportFactory(), new JsonRpcTransportFactory()],
    // Both are on pactd's card; HTTP+JSON is PACT's and comes first.
    preferredTransports: [binding],
    clientConfig: { interceptors: [auth] },
  }),
);
// The card URL itself, with an empty path: the interface URL has no
// trailing slash, so the SDK's default relative path would miss it.
const client = await factory.createFromUrl(cardUrl, "");
// [/doc:client]
const card = await client.getAgentCard();
emit("card", {
  name: card.name,
  description: card.description,
  transport: client.transport.protocolName,
  interfaces: card.supportedInterfaces.map((i) => i.protocolBinding),
});

// [doc:send]
// The SDK's types are protobuf-shaped; fromJSON takes the wire form.
function userMessage(messageId, text, contextId) {
  return Message.fromJSON({
    messageId,
    contextId,
    role: "ROLE_USER",
    parts: [{ text }],
  });
}

async function send(messageId, text, contextId) {
  const result = await client.sendMessage({
    tenant: "",
    message: userMessage(messageId, text, contextId),
    configuration: undefined,
    metadata: undefined,
  });
  // A Message has a role; a Task (a step-up) has a status.
  return result.status ? { task: Task.toJSON(result) } : { message: Message.toJSON(result) };
}
// [/doc:send]

// The identity turn, then the same conversation continued.
const first = await send("js-m1", "hello");
emit("identity", first);
const contextId = first.message.contextId;
emit("continued", await send("js-m2", "hello again", contextId));

// The step-up: an account question without a delegation token.
const stepUp = await send("js-m3", "show my orders", contextId);
const task = stepUp.task;
const link = new URL(task.metadata["pact.verificationUriComplete"]);
// [doc:device]
// PACT §5.5: the PA runs the device authorization again for the missing
// scopes. Its request takes over the task's link, so the person approves
// the code they were shown and the PA holds the device code to collect it.
// The endpoints are on the card: its userDelegation scheme's device flow.
const flow = AgentCard.toJSON(card).securitySchemes.userDelegation.oauth2SecurityScheme.flows.deviceCode;
async function oauth(url, form) {
  const res = await fetch(url, {
    method: "POST",
    headers: { Authorization: `Bearer ${await freshPaJwt()}` },
    body: new URLSearchParams(form),
  });
  return { status: res.status, body: await res.json() };
}
const issuer = process.env.PA_ISSUER;
const device = await oauth(flow.deviceAuthorizationUrl, {
  client_id: issuer,
  scope: task.metadata["pact.missingScopes"].join(" "),
});
// [/doc:device]
emit("step-up", {
  task,
  linkUserCode: link.searchParams.get("user_code"),
  userCode: device.body.user_code,
});

// [doc:follow]
// A2A 1.0 §3.1.3: follow the task with Get Task until it leaves
// TASK_STATE_AUTH_REQUIRED (the person decides at the link).
const states = [];
let followed;
for (let i = 0; i < 120; i++) {
  followed = await client.getTask({ tenant: "", id: task.id, historyLength: undefined });
  const state = Task.toJSON(followed).status.state;
  if (states[states.length - 1] !== state) states.push(state);
  if (state !== "TASK_STATE_AUTH_REQUIRED") break;
  // The test's person approves once the task was seen pending.
  if (i === 0) emit("pending", { task: Task.toJSON(followed) });
  await new Promise((r) => setTimeout(r, 500));
}
// [/doc:follow]
emit("followed", { states, task: Task.toJSON(followed) });

// [doc:collect]
// Approved: collect the token (RFC 8628 §3.4) and send again with it.
let token;
for (let i = 0; i < 30 && !token; i++) {
  const polled = await oauth(flow.tokenUrl, {
    grant_type: "urn:ietf:params:oauth:grant-type:device_code",
    device_code: device.body.device_code,
    client_id: issuer,
  });
  if (polled.status === 200) token = polled.body.access_token;
  else await new Promise((r) => setTimeout(r, device.body.interval * 1000));
}
auth.delegation = token;
const delegated = await send("js-m4", "show my orders", contextId);
// [/doc:collect]
emit("delegated", delegated);

// [doc:errors]
// pactd's A2A errors arrive as the SDK's typed errors, over either binding.
async function failure(call) {
  try {
    await call();
    return { thrown: false };
  } catch (e) {
    return { thrown: true, name: e.constructor.name, reason: e.reason, message: e.message };
  }
}
const errors = {
  unknownContext: await failure(() => send("js-m5", "hello", "no-such-context")),
  unknownTask: await failure(() => client.getTask({ tenant: "", id: "no-such-task" })),
  // Only the person ends a step-up task, at its link.
  cancel: await failure(() => client.cancelTask({ tenant: "", id: task.id, metadata: undefined })),
  nonText: await failure(() =>
    client.sendMessage({
      tenant: "",
      message: Message.fromJSON({
        messageId: "js-m6",
        contextId,
        role: "ROLE_USER",
        parts: [{ url: "https://example.com/a.png", mediaType: "image/png" }],
      }),
      configuration: undefined,
      metadata: undefined,
    }),
  ),
};
// [/doc:errors]
emit("errors", errors);
// Step-up tasks are found by id; the list stays PACT's empty one.
const listed = await client.listTasks({ tenant: "", contextId: "", status: 0, pageToken: "", pageSize: undefined, historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
emit("listed", { count: listed.tasks.length });
emit("done", {});

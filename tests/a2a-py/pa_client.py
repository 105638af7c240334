"""A personal agent written with the official A2A Python SDK (a2a-sdk, pinned
in requirements.txt), used as an agent developer would use it against pactd:
resolve the card, pick a binding, add the PA-JWT (and the delegation token
once there is one) in an interceptor, and follow a step-up task with Get
Task. tests/it/a2a_sdk.rs runs it in a virtual environment and checks every
line it prints (one JSON object per line); docs/a2a-clients.md quotes it.

Environment: A2A_CARD_URL (the brand's card), A2A_BINDING ("HTTP+JSON" or
"JSONRPC"), PA_HELPER_URL (the test's loopback endpoint that mints a fresh
PA-JWT for each call, as a personal agent signs its own: they are
short-lived),
PA_ISSUER (the PA's client_id).
"""

import asyncio
import json
import os
import sys
from urllib.parse import parse_qs, urlparse

import httpx
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a.client import (
    A2ACardResolver,
    ClientCallContext,
    ClientCallInterceptor,
    ClientConfig,
    ClientFactory,
)
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
)
from a2a.utils.errors import A2A_ERROR_MAPPING, A2AError

CARD_URL = os.environ["A2A_CARD_URL"]
BINDING = os.environ["A2A_BINDING"]
HELPER = os.environ["PA_HELPER_URL"]
ISSUER = os.environ["PA_ISSUER"]
TRANSPORTS = {"RestTransport": "HTTP+JSON", "JsonRpcTransport": "JSONRPC"}


def emit(step, **value):
    print(json.dumps({"step": step, **value}), flush=True)


async def fresh_pa_jwt(http):
    return (await http.get(f"{HELPER}/pa-jwt")).text


# [doc:interceptor]
class PactAuth(ClientCallInterceptor):
    """The PA-JWT in Authorization on every call; the delegation token, once
    the person granted one, in X-A2A-User-Delegation (pactd's card says so in
    its userDelegation scheme). The SDK's AuthInterceptor stops after the
    first credential and would send an OAuth2 token as Authorization, so the
    two headers are set here."""

    def __init__(self, http):
        self.http = http
        self.delegation = None

    async def before(self, args):
        if args.context is None:
            args.context = ClientCallContext()
        if args.context.service_parameters is None:
            args.context.service_parameters = {}
        headers = args.context.service_parameters
        headers["Authorization"] = f"Bearer {await fresh_pa_jwt(self.http)}"
        if self.delegation:
            headers["X-A2A-User-Delegation"] = f"Bearer {self.delegation}"

    async def after(self, args):
        pass
# [/doc:interceptor]


def wire(proto):
    """The SDK's protobuf object in A2A's JSON form."""
    return MessageToDict(proto)


async def main():
    async with httpx.AsyncClient(timeout=30) as http:
        auth = PactAuth(http)
        # [doc:client]
        # The default is JSON-RPC only; list the bindings this agent speaks
        # (pactd's card has HTTP+JSON first, then JSON-RPC).
        config = ClientConfig(
            httpx_client=http,
            streaming=False,
            supported_protocol_bindings=[BINDING],
        )
        # The card URL itself: "/" means no path after it.
        card = await A2ACardResolver(http, CARD_URL).get_agent_card(relative_card_path="/")
        client = ClientFactory(config).create(card, interceptors=[auth])
        # [/doc:client]
        # With the SDK's default configuration (JSON-RPC only) the card works too.
        default = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        emit(
            "card",
            name=card.name,
            description=card.description,
            # Which transport the factory picked (the SDK does not say publicly).
            transport=TRANSPORTS.get(type(client._transport).__name__),
            interfaces=[i.protocol_binding for i in card.supported_interfaces],
            defaultTransport=TRANSPORTS.get(type(default._transport).__name__),
        )

        # [doc:send]
        def user_message(message_id, text, context_id=None):
            message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
            if context_id:
                message["contextId"] = context_id
            return ParseDict(message, Message())

        async def send(message):
            async for event in client.send_message(SendMessageRequest(message=message)):
                # Without streaming there is one event: a message, or a task
                # (a step-up).
                if event.HasField("task"):
                    return {"task": wire(event.task)}
                return {"message": wire(event.message)}
        # [/doc:send]

        first = await send(user_message("py-m1", "hello"))
        emit("identity", **first)
        context_id = first["message"]["contextId"]
        emit("continued", **await send(user_message("py-m2", "hello again", context_id)))

        step_up = await send(user_message("py-m3", "show my orders", context_id))
        task = step_up["task"]
        link = urlparse(task["metadata"]["pact.verificationUriComplete"])

        # [doc:device]
        # PACT §5.5: the PA runs the device authorization again for the
        # missing scopes; its request takes over the task's link, so the person
        # approves the code they were shown and the PA can collect the token.
        # The endpoints are on the card: its userDelegation scheme's device flow.
        flow = card.security_schemes["userDelegation"].oauth2_security_scheme.flows.device_code

        async def oauth(url, form):
            res = await http.post(
                url,
                data=form,
                headers={"Authorization": f"Bearer {await fresh_pa_jwt(http)}"},
            )
            return res.status_code, res.json()

        _, device = await oauth(
            flow.device_authorization_url,
            {"client_id": ISSUER, "scope": " ".join(task["metadata"]["pact.missingScopes"])},
        )
        # [/doc:device]
        emit(
            "step-up",
            task=task,
            linkUserCode=parse_qs(link.query)["user_code"][0],
            userCode=device["user_code"],
        )

        # [doc:follow]
        # A2A 1.0 §3.1.3: follow the task with Get Task until it leaves
        # TASK_STATE_AUTH_REQUIRED (the person decides at the link).
        states = []
        for attempt in range(120):
            followed = wire(await client.get_task(GetTaskRequest(id=task["id"])))
            state = followed["status"]["state"]
            if not states or states[-1] != state:
                states.append(state)
            if state != "TASK_STATE_AUTH_REQUIRED":
                break
            if len(states) == 1 and attempt == 0:
                # The test's person approves once the task was seen pending.
                emit("pending", task=followed)
            await asyncio.sleep(0.5)
        # [/doc:follow]
        emit("followed", states=states, task=followed)

        # [doc:collect]
        # Approved: collect the token (RFC 8628 §3.4) and send again with it.
        token = None
        for _ in range(30):
            status, body = await oauth(
                flow.token_url,
                {
                    "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                    "device_code": device["device_code"],
                    "client_id": ISSUER,
                },
            )
            if status == 200:
                token = body["access_token"]
                break
            await asyncio.sleep(device["interval"])
        auth.delegation = token
        delegated = await send(user_message("py-m4", "show my orders", context_id))
        # [/doc:collect]
        emit("delegated", **delegated)

        # [doc:errors]
        # pactd's A2A errors arrive as the SDK's typed errors, over either binding.
        async def failure(call):
            try:
                await call
                return {"thrown": False}
            except A2AError as e:
                mapped = A2A_ERROR_MAPPING.get(type(e))
                return {
                    "thrown": True,
                    "name": type(e).__name__,
                    "reason": mapped.reason if mapped else None,
                    "message": e.message,
                }

        non_text = ParseDict(
            {
                "messageId": "py-m6",
                "contextId": context_id,
                "role": "ROLE_USER",
                "parts": [{"url": "https://example.com/a.png", "mediaType": "image/png"}],
            },
            Message(),
        )
        errors = {
            "unknownContext": await failure(send(user_message("py-m5", "hello", "no-such-context"))),
            "unknownTask": await failure(client.get_task(GetTaskRequest(id="no-such-task"))),
            # Only the person ends a step-up task, at its link.
            "cancel": await failure(client.cancel_task(CancelTaskRequest(id=task["id"]))),
            "nonText": await failure(send(non_text)),
        }
        # [/doc:errors]
        emit("errors", **errors)
        # Step-up tasks are found by id; the list stays PACT's empty one.
        listed = await client.list_tasks(ListTasksRequest())
        emit("listed", count=len(listed.tasks))
        await client.close()
    emit("done")


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)

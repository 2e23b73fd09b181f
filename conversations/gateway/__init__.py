"""The OpenAI-compatible gateway: /v1/chat/completions and /v1/models for API clients.

A call is a send like the chat page's: it goes through the generation service
(conversations.generation.replies), so its reply runs in the conversation's group (a RunningReply),
recorded, limited and stoppable as any other; only the transport differs.

- errors: refusals as OpenAI-style error objects, with their HTTP status;
- wire: a request body checked into a ChatCall;
- auth: the caller, from a personal API token;
- calls: the service: a call's conversation, history and send, and its reply as the response
  reads it (stopped when the client goes away);
- sse: the chunks and objects of the wire format;
- views, urls: the async Django views, thin;
- schema: the endpoints' part of the OpenAPI schema; schema_components: the bodies it names.
"""

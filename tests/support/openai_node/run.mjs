// One call through the official openai Node SDK, for chatsite's gateway conformance tests
// (tests/support/node_sdk.py runs it). The case is one JSON object on stdin:
//
//   {"base_url": "http://127.0.0.1:PORT/v1", "api_key": "cs_...", "body": {...},
//    "close_after": 4}
//
// `body` is the Chat Completions request as the SDK's create() takes it; `close_after` (streamed
// calls only) closes the stream once that many chunks were read, as a client that gives up does.
// Each line of stdout is one JSON object, written as it happens, so that a test can act while the
// stream runs (a tab's Stop):
//   {"event": "headers", "headers": {...}}   the response's headers, once they arrived
//   {"event": "chunk", "chunk": {...}}       each streamed chunk, as the SDK handed it over
//   {"event": "result", ...}                 last: "completion" (not streamed), "closed" (true
//                                            when it closed the stream itself), or "error"
import OpenAI from "openai";

function print(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

function describe(error) {
  // The SDK's own exception: its class name says which one the caller would catch.
  return {
    class: error.constructor.name,
    is_api_error: error instanceof OpenAI.APIError,
    status: error.status ?? null,
    code: error.code ?? null,
    param: error.param ?? null,
    type: error.type ?? null,
    message: error.message,
  };
}

async function readStdin() {
  const parts = [];
  for await (const part of process.stdin) parts.push(part);
  return JSON.parse(Buffer.concat(parts).toString("utf8"));
}

async function run(task) {
  const client = new OpenAI({
    baseURL: task.base_url,
    apiKey: task.api_key,
    maxRetries: 0, // a retried call would be a second call
    timeout: 20_000,
  });
  const { data, response } = await client.chat.completions.create(task.body).withResponse();
  print({ event: "headers", headers: Object.fromEntries(response.headers.entries()) });
  if (!task.body.stream) {
    return { completion: data };
  }
  let read = 0;
  for await (const chunk of data) {
    print({ event: "chunk", chunk });
    read += 1;
    if (task.close_after && read >= task.close_after) {
      data.controller.abort(); // the SDK's way to close a stream it is reading
      return { closed: true };
    }
  }
  return { closed: false };
}

const task = await readStdin();
try {
  print({ event: "result", ...(await run(task)) });
} catch (error) {
  print({ event: "result", error: describe(error) });
}

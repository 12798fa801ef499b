// The official OpenAI SDK through a real Envoy whose ext_proc filter asks
// kvgate's endpoint picker: whole and streamed chats as the engine answers
// them, a session's turns on one replica, the picker's refusal as the
// SDK's typed error.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startEnvoyStack } from './harness.mjs';

let stack;
let client;

before(async () => {
  stack = await startEnvoyStack();
  client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  await stack.stop();
});

const system = { role: 'system', content: 'You answer questions about timber, briefly and precisely, naming the grade.' };

test('a whole chat and its next turn, streamed, through Envoy and the picker', async () => {
  const headers = { 'x-session-id': 'sdk-envoy' };
  const messages = [system, { role: 'user', content: 'Which grade of oak for a table top?' }];
  const { data, response } = await client.chat.completions
    .create({ model: 'sim-model', messages, max_tokens: 4 }, { headers })
    .withResponse();
  assert.equal(data.object, 'chat.completion');
  assert.equal(data.choices[0].message.content, 'tok0 tok1 tok2 tok3 ');
  assert.equal(data.usage.completion_tokens, 4);
  const worker = response.headers.get('x-kvgate-worker');
  assert.match(worker, /^s[01]$/);
  assert.match(response.headers.get('x-kvgate-route'), new RegExp(`^worker=${worker}; `));

  messages.push(data.choices[0].message, { role: 'user', content: 'And for the legs?' });
  const stream = await client.chat.completions
    .create({ model: 'sim-model', messages, max_tokens: 3, stream: true }, { headers })
    .withResponse();
  assert.equal(stream.response.headers.get('x-kvgate-worker'), worker);
  let text = '';
  let chunks = 0;
  for await (const chunk of stream.data) {
    chunks += 1;
    assert.equal(chunk.usage ?? null, null); // the client did not ask for usage
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, 'tok0 tok1 tok2 ');
  assert.ok(chunks >= 3);
  const session = await fetch(`${stack.adminURL}/debug/sessions/sdk-envoy`).then((r) => r.json());
  assert.equal(session.turns.length, 2);
  assert.ok(session.turns[1].cached_tokens > 0);
});

test("the picker's refusal reaches the SDK as OpenAI's typed error", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [system], max_tokens: 2 }),
    (error) => {
      assert.ok(error instanceof OpenAI.NotFoundError);
      assert.equal(error.status, 404);
      assert.equal(error.code, 'model_not_found');
      return true;
    });
});

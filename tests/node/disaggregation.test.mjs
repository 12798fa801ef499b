// The official OpenAI SDK against a disaggregated fleet: one response,
// streamed or not, whatever ran the prefill.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startPdStack } from './harness.mjs';

let stack;
let client;

before(async () => {
  stack = await startPdStack();
  client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  await stack.stop();
});

const longPrompt = Array.from({ length: 200 }, (_, i) => `fact${i}`).join(' ');

test('a long prompt is prefilled on the prefill worker and decoded on the decoder', async () => {
  const { data, response } = await client.chat.completions
    .create({ model: 'pd-model', messages: [{ role: 'user', content: longPrompt }], max_tokens: 3 })
    .withResponse();
  assert.equal(data.choices[0].message.content, 'tok0 tok1 tok2 ');
  assert.equal(data.usage.completion_tokens, 3);
  assert.equal(response.headers.get('x-kvgate-worker'), 'd0');
  assert.equal(response.headers.get('x-kvgate-prefill-worker'), 'p0');
  assert.match(response.headers.get('x-kvgate-route'), /prefill=remote_prefill; prefill_worker=p0/);
});

test('a stream comes from the decoder with its usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'pd-model', messages: [{ role: 'user', content: `${longPrompt} again` }], max_tokens: 4, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) text += chunk.choices[0].delta.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, 'tok0 tok1 tok2 tok3 ');
  assert.equal(usage.completion_tokens, 4);
  assert.ok(usage.prompt_tokens > 64);
});

test('a short prompt is prefilled by the decoder itself', async () => {
  const { response } = await client.chat.completions
    .create({ model: 'pd-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })
    .withResponse();
  assert.equal(response.headers.get('x-kvgate-worker'), 'd0');
  assert.equal(response.headers.get('x-kvgate-prefill-worker'), null);
  assert.match(response.headers.get('x-kvgate-route'), /prefill=local_prefill/);
});

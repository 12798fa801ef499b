// The official OpenAI SDK against kvgate: what application developers see.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startStack } from './harness.mjs';

let stack;
let client;

before(async () => {
  stack = await startStack();
  client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  await stack.stop();
});

const messages = [{ role: 'user', content: 'Hello from the SDK' }];

test('non-streaming chat completion', async () => {
  const { data, response } = await client.chat.completions
    .create({ model: 'test-model', messages, max_tokens: 3 })
    .withResponse();
  assert.equal(data.object, 'chat.completion');
  assert.equal(data.choices[0].message.content, 'tok0 tok1 tok2 ');
  assert.equal(data.usage.completion_tokens, 3);
  assert.match(response.headers.get('x-kvgate-worker'), /^u[01]$/);
  assert.equal(response.headers.get('x-request-id').length, 32);
});

test('streaming chat completion with usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'test-model', messages, max_tokens: 4, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) text += chunk.choices[0].delta.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, 'tok0 tok1 tok2 tok3 ');
  assert.equal(usage.completion_tokens, 4);
  assert.equal(usage.prompt_tokens_details.cached_tokens, 0);
});

test('text completion', async () => {
  const completion = await client.completions.create({ model: 'test-model', prompt: 'Once upon', max_tokens: 2 });
  assert.equal(completion.object, 'text_completion');
  assert.equal(completion.choices[0].text, 'tok0 tok1 ');
});

test('models list comes from the gateway config', async () => {
  const ids = [];
  for await (const model of client.models.list()) ids.push(model.id);
  assert.deepEqual(ids, ['test-model']);
});

test('unknown model is the SDK typed NotFoundError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages }),
    (error) => {
      assert.ok(error instanceof OpenAI.NotFoundError);
      assert.equal(error.status, 404);
      assert.equal(error.code, 'model_not_found');
      assert.equal(error.param, 'model');
      return true;
    },
  );
});

test('malformed request is the SDK typed BadRequestError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'test-model', messages: 'not a list' }),
    (error) => error instanceof OpenAI.BadRequestError && error.param === 'messages',
  );
});

test('upstream dying mid-stream surfaces as an error, not a short answer', async () => {
  const stream = await client.chat.completions.create(
    { model: 'test-model', messages, max_tokens: 10, stream: true },
    { headers: { 'x-test-fault': 'drop_after:2' } },
  );
  let text = '';
  await assert.rejects(async () => {
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  }, /upstream worker stopped in the middle of the stream/);
  assert.equal(text, 'tok0 tok1 ');
});

// tests/server/openai_client.js — llama-server driven by the official OpenAI client (npm package "openai",
// fetched into the npm cache by tests/tokenizer-refs/fetch_packages.sh; NODE_PATH points at it).
// Run by tests/server/test_openai_client.py against a running server:
//   node openai_client.js BASE_URL MODEL_ID API_KEY [--chat | --embeddings]
// Checks, with node's assert (exit status 1 and the failed assertion on stderr on any mismatch):
//  - completions (non-streamed and streamed: the streamed text equals the whole answer), usage counts;
//  - stop strings: a stop taken from the free-running text ends the answer right before it;
//  - a wrong API key is refused with 401 (AuthenticationError), an unknown model with 404;
//  - with --chat: chat completions, non-streamed and streamed, the same way;
//  - 8 concurrent clients x 4 requests each (greedy, different prompts and lengths): every request
//    completes, and each answer equals the answer the same request got alone, byte for byte.
// With --embeddings (an embedding server) instead, embeddings.create:
//  - one string, several strings, token ids: one L2-normalized vector per input, in order, usage counts;
//    the client's default (it asks for base64 and decodes it) equals encoding_format "float" exactly;
//  - refusals: 400 for "dimensions" other than the model's and for completions (embeddings only), 401 wrong
//    key, 404 unknown model;
//  - 8 concurrent clients x 4 requests of 1 to 3 texts: every vector equals the same request's alone.
// Prints one summary line per check on stdout.
'use strict';
const assert = require('node:assert/strict');
const OpenAI = require('openai').default ?? require('openai');

const [base, model, key] = process.argv.slice(2, 5);
const chat = process.argv.includes('--chat');
const embeddingsOnly = process.argv.includes('--embeddings');
const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 600 * 1000 });

function prompts(n) {
  const words = ['river', 'stone', 'lamp', 'north', 'green', 'paper', 'orbit', 'salt', 'violin', 'ember'];
  const out = [];
  for (let i = 0; i < n; i++) {
    const k = 1 + (i * 7) % 9;
    out.push(Array.from({ length: k }, (_, j) => words[(i * 3 + j * 5) % words.length]).join(' '));
  }
  return out;
}

async function complete(prompt, extra = {}) {
  const r = await client.completions.create({ model, prompt, temperature: 0, ...extra });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  return r;
}

async function completeStream(prompt, extra = {}) {
  const s = await client.completions.create({
    model, prompt, temperature: 0, stream: true, stream_options: { include_usage: true }, ...extra,
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const ch of s) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      text += c.text ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage };
}

async function chatOnce(content, extra = {}) {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content }], temperature: 0, ...extra,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  return r;
}

async function chatStream(content, extra = {}) {
  const s = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content }], temperature: 0,
    stream: true, ...extra,
  });
  let text = '';
  let finish = null;
  let role = null;
  for await (const ch of s) {
    assert.equal(ch.object, 'chat.completion.chunk');
    const d = ch.choices[0];
    if (!d) continue;
    if (d.delta.role) role = d.delta.role;
    text += d.delta.content ?? '';
    if (d.finish_reason) finish = d.finish_reason;
  }
  return { text, finish, role };
}

async function embed(input, extra = {}) {
  const r = await client.embeddings.create({ model, input, ...extra });
  assert.equal(r.object, 'list');
  assert.equal(r.model, model);
  const n = typeof input === 'string' || typeof input[0] === 'number' ? 1 : input.length;
  assert.deepEqual(r.data.map((d) => [d.object, d.index]), Array.from({ length: n }, (_, i) => ['embedding', i]));
  return r;
}

async function embeddingsMain() {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [model]);

  // one text: the client's default (base64, decoded by the client) equals the floats, bit for bit
  const one = await embed('The quick brown fox');
  const v = one.data[0].embedding;
  assert.ok(Array.isArray(v) && v.length >= 8, `a vector, got ${JSON.stringify(v).slice(0, 80)}`);
  const norm = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
  assert.ok(Math.abs(norm - 1) < 1e-5, `L2 norm ${norm}`);
  assert.ok(one.usage.prompt_tokens > 0);
  assert.equal(one.usage.total_tokens, one.usage.prompt_tokens);
  const asFloat = await embed('The quick brown fox', { encoding_format: 'float' });
  assert.deepEqual(asFloat.data[0].embedding.map(Math.fround), v);
  const b64 = await embed('The quick brown fox', { encoding_format: 'base64' });
  assert.equal(typeof b64.data[0].embedding, 'string');
  const buf = Buffer.from(b64.data[0].embedding, 'base64');
  assert.deepEqual(Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4)), v);
  console.log(`embeddings: ${v.length} dimensions, norm ${norm.toFixed(6)}, base64 equals float`);

  // several texts in order; token ids give the vectors of the texts they tokenize
  const texts = ['a', 'The quick brown fox', 'héllo wörld'];
  const many = await embed(texts, { dimensions: v.length });
  assert.deepEqual(many.data[1].embedding, v);
  const ids = [];
  for (const t of texts) {
    const r = await fetch(base.replace(/\/v1$/, '') + '/tokenize', {
      method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: JSON.stringify({ content: t, add_special: true }),
    });
    ids.push((await r.json()).tokens);
  }
  assert.equal(many.usage.prompt_tokens, ids.reduce((a, t) => a + t.length, 0));
  const byIds = await embed(ids);
  assert.deepEqual(byIds.data.map((d) => d.embedding), many.data.map((d) => d.embedding));
  assert.deepEqual((await embed(ids[0])).data[0].embedding, many.data[0].embedding);
  console.log(`embeddings: ${texts.length} texts in order, token ids equal to their texts, ${many.usage.prompt_tokens} tokens`);

  // refusals
  await assert.rejects(embed('x', { dimensions: v.length + 1 }), (e) => {
    assert.equal(e.status, 400);
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, 'dimensions');
    return true;
  });
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 1 }), (e) => {
    assert.equal(e.status, 400);
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.match(e.message, /this model serves embeddings only/);
    return true;
  });
  const bad = new OpenAI({ baseURL: base, apiKey: key + 'x', maxRetries: 0 });
  await assert.rejects(bad.embeddings.create({ model, input: 'x' }), (e) => {
    assert.equal(e.status, 401);
    assert.ok(e instanceof OpenAI.AuthenticationError);
    return true;
  });
  await assert.rejects(client.embeddings.create({ model: 'text-embedding-3-small', input: 'x' }), (e) => {
    assert.equal(e.status, 404);
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  console.log('refusals: 400 dimensions, 400 completions on an embedding server, 401 wrong key, 404 unknown model');

  // 8 clients x 4 requests of 1 to 3 texts, each equal to the request alone
  const ps = prompts(32);
  const req = (i) => Array.from({ length: 1 + i % 3 }, (_, k) => ps[(i + 5 * k) % ps.length] + ` ${i}`);
  const alone = [];
  for (let i = 0; i < ps.length; i++) alone.push((await embed(req(i))).data);
  const t0 = Date.now();
  const together = new Array(ps.length);
  await Promise.all(Array.from({ length: 8 }, async (_, c) => {
    for (let k = 0; k < 4; k++) {
      const i = c * 4 + k;
      together[i] = (await embed(req(i))).data;
    }
  }));
  for (let i = 0; i < ps.length; i++) assert.deepEqual(together[i], alone[i], `request ${i}`);
  console.log(`concurrency: 8 clients x 4 embedding requests in ${Date.now() - t0} ms, every answer equal to the request alone`);
}

async function main() {
  if (embeddingsOnly) return embeddingsMain();
  // the one model
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [model]);

  // completions: whole and streamed agree
  const p0 = 'The quick brown fox';
  const whole = await complete(p0, { max_tokens: 24, ignore_eos: true });
  assert.equal(whole.usage.completion_tokens, 24);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 24);
  assert.equal(whole.choices[0].finish_reason, 'length');
  const streamed = await completeStream(p0, { max_tokens: 24, ignore_eos: true });
  assert.equal(streamed.text, whole.choices[0].text);
  assert.equal(streamed.finish, 'length');
  assert.deepEqual(streamed.usage, whole.usage);
  console.log(`completions: ${whole.usage.completion_tokens} tokens, streamed text equals the whole answer`);

  // stop strings: a stop from the middle of the free-running text
  // (two printable ASCII characters: the dummy model also writes bytes that are not UTF-8, which the
  // answer shows as U+FFFD, so a stop string spelled with U+FFFD would not be the bytes it stands for)
  const free = whole.choices[0].text;
  const at = free.slice(3).search(/[ -~]{2}/);
  assert.ok(at >= 0, `no two printable ASCII characters in ${JSON.stringify(free)}`);
  const stop = free.slice(3 + at, 5 + at);
  const before = free.slice(0, free.indexOf(stop));
  const stopped = await complete(p0, { max_tokens: 24, ignore_eos: true, stop: ['\u0001', stop] });
  assert.equal(stopped.choices[0].text, before);
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  const stoppedStream = await completeStream(p0, { max_tokens: 24, ignore_eos: true, stop });
  assert.equal(stoppedStream.text, before);
  assert.equal(stoppedStream.finish, 'stop');
  console.log(`stop strings: the answer ends before ${JSON.stringify(stop)} (${before.length} characters)`);

  // refusals the client raises as typed errors
  const bad = new OpenAI({ baseURL: base, apiKey: key + 'x', maxRetries: 0 });
  await assert.rejects(bad.completions.create({ model, prompt: 'x', max_tokens: 1 }), (e) => {
    assert.equal(e.status, 401);
    assert.ok(e instanceof OpenAI.AuthenticationError);
    assert.equal(e.code, 'invalid_api_key');
    return true;
  });
  await assert.rejects(client.completions.create({ model: model + '-nope', prompt: 'x', max_tokens: 1 }), (e) => {
    assert.equal(e.status, 404);
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 1, temperature: 9 }), (e) => {
    assert.equal(e.status, 400);
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, 'temperature');
    return true;
  });
  console.log('refusals: 401 wrong key, 404 unknown model, 400 bad temperature');

  if (chat) {
    const c = await chatOnce('Say hello', { max_tokens: 16, ignore_eos: true });
    assert.equal(c.usage.completion_tokens, 16);
    const cs = await chatStream('Say hello', { max_tokens: 16, ignore_eos: true });
    assert.equal(cs.role, 'assistant');
    assert.equal(cs.text, c.choices[0].message.content);
    assert.equal(cs.finish, 'length');
    console.log('chat: streamed text equals the whole answer');
  }

  // 8 clients x 4 requests, each answer equal to the same request alone
  const ps = prompts(32);
  const req = (i) => ({ max_tokens: 4 + (i * 5) % 13, ignore_eos: i % 3 !== 0 });
  const one = async (i) => {
    if (chat && i % 2 === 1) return (await chatOnce(ps[i], req(i))).choices[0].message.content;
    if (i % 4 === 2) return (await completeStream(ps[i], req(i))).text;
    return (await complete(ps[i], req(i))).choices[0].text;
  };
  const alone = [];
  for (let i = 0; i < ps.length; i++) alone.push(await one(i));
  const t0 = Date.now();
  const together = new Array(ps.length);
  await Promise.all(Array.from({ length: 8 }, async (_, c) => {
    for (let k = 0; k < 4; k++) {
      const i = c * 4 + k;
      together[i] = await one(i);
    }
  }));
  for (let i = 0; i < ps.length; i++) assert.equal(together[i], alone[i], `request ${i} (${JSON.stringify(ps[i])})`);
  console.log(`concurrency: 8 clients x 4 requests in ${Date.now() - t0} ms, every answer equal to the request alone`);
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});

// The official `openai` npm client (pinned in package-lock.json) against `lfmvox serve` on a free
// loopback port, with the demo checkpoints tests/server_test.cc uses. Each reply is compared with the
// CLI run on the same model and input: the transcript with `lfmvox asr`, greedy speech with
// `lfmvox tts --temperature 0 --seed 0` (the server is deterministic: server_test checks its PCM bit
// for bit against the library), stream against non-stream, and a realtime turn through the client's
// OpenAIRealtimeWS with `lfmvox chat --seed 0` on the same 24 kHz clip.
//   node openai_client_test.mjs LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR   (run_openai_test.sh)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { demoCheckpoint, serve as serveAt, testRunner } from './serve.mjs';

const [lfmvox, makeCheckpoint, dataDir, work] = process.argv.slice(2).map((p) => path.resolve(p));
// Node 18 (Debian 12) has File in node:buffer only; the client's uploads need it as a global.
if (globalThis.File === undefined) globalThis.File = (await import('node:buffer')).File;
const require = createRequire(path.join(work, 'package.json'));
const { default: OpenAI, toFile, APIError } = await import(require.resolve('openai'));
const { OpenAIRealtimeWS } = await import(require.resolve('openai/realtime/ws'));
const { realtimeTurn } = await import('./realtime_client.mjs');

const kMaxNew = '40';  // every generation's cap, server and CLI, as in server_test
const kText = 'Hello there.', kVoice = 'US female';
const kKey = 'test-key';
const wavPath = path.join(dataDir, 'inputs/question.wav');
const wav = readFileSync(wavPath);

const checkpoint = (name, steer) => demoCheckpoint(makeCheckpoint, dataDir, path.join(work, name), steer ? [kText, kVoice] : null);
const serve = (model) => serveAt(lfmvox, model, ['--max-new', kMaxNew, '--threads', '1', '--api-key', kKey]);

const client = (port, key = kKey) => new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });

// The data chunk of a WAV (RIFF) file.
function wavData(buf) {
  assert.equal(buf.subarray(0, 4).toString('latin1'), 'RIFF');
  for (let i = 12; i + 8 <= buf.length;) {
    const id = buf.subarray(i, i + 4).toString('latin1'), n = buf.readUInt32LE(i + 4);
    if (id === 'data') return buf.subarray(i + 8, n === 0xffffffff ? buf.length : i + 8 + n);
    i += 8 + n + (n & 1);
  }
  throw new Error('no data chunk');
}

// The `data:` payloads of an SSE body.
const sseData = (text) => text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));

const { test, finish } = testRunner();

const ttsDir = checkpoint('demo_tts', true), textDir = checkpoint('demo_text', false);
// References from the CLI on the same files.
const refPcm = execFileSync(lfmvox, ['tts', '--model', ttsDir, '--voice', kVoice, '--temperature', '0', '--seed', '0',
                                     '--max-new', kMaxNew, '--threads', '1', '--quiet', kText, '-o', '-']);
const refText = execFileSync(lfmvox, ['asr', '--model', textDir, '--max-new', kMaxNew, '--threads', '1', wavPath],
                             { stdio: ['ignore', 'pipe', 'ignore'] }).toString().replace(/\n$/, '');
assert.ok(refPcm.length > 0 && refPcm.length % 2 === 0, 'the CLI speaks');
assert.ok(refText.length > 0, 'the CLI transcribes');
// Realtime: the 24 kHz clip's PCM16 as a client sends it; the same turn through `lfmvox chat` (the server's
// realtime sessions are a chat with the default system prompt, seed 0: server_test checks them against
// the library bit for bit).
const clip24Path = path.join(dataDir, 'inputs/synthetic_24k.wav');
const refChat = execFileSync(lfmvox, ['chat', '--model', ttsDir, '--in', clip24Path, '--out', '-', '--seed', '0',
                                      '--max-new', kMaxNew, '--threads', '1'], { stdio: ['ignore', 'pipe', 'ignore'] });
assert.ok(refChat.length > 1920 * 2, 'the CLI answers in speech');
const refText24 = execFileSync(lfmvox, ['asr', '--model', textDir, '--max-new', kMaxNew, '--threads', '1', clip24Path],
                               { stdio: ['ignore', 'pipe', 'ignore'] }).toString().replace(/\n$/, '');
assert.ok(refText24.length > 0, 'the CLI transcribes the 24 kHz clip');
const wavSeconds = wavData(wav).length / (wav.readUInt16LE(22) * 2) / wav.readUInt32LE(24);

const tts = await serve(ttsDir), text = await serve(textDir);
const speech = client(tts.port), asr = client(text.port);

try {
  const file = () => toFile(wav, 'question.wav', { type: 'audio/wav' });
  await test('transcription json = lfmvox asr', async () => {
    const r = await asr.audio.transcriptions.create({ model: 'whisper-1', file: await file() });
    assert.equal(r.text, refText);
    assert.equal(r.usage.type, 'duration');
    assert.ok(Math.abs(r.usage.seconds - wavSeconds) < 1e-3, `${r.usage.seconds} vs ${wavSeconds}`);
  });
  await test('transcription text, srt, vtt', async () => {
    const t = await asr.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'text' });
    assert.equal(t, refText + '\n');
    const srt = await asr.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'srt' });
    assert.match(srt, /^1\n00:00:00,000 --> \d\d:\d\d:\d\d,\d\d\d\n/);
    assert.ok(srt.endsWith('\n' + refText + '\n\n'), srt);
    const vtt = await asr.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'vtt' });
    assert.match(vtt, /^WEBVTT\n\n00:00:00\.000 --> \d\d:\d\d:\d\d\.\d\d\d\n/);
    assert.ok(vtt.endsWith('\n' + refText + '\n\n'), vtt);
  });
  await test('transcription verbose_json segments', async () => {
    const r = await asr.audio.transcriptions.create({
      model: 'whisper-1', file: await file(), response_format: 'verbose_json', timestamp_granularities: ['segment'] });
    assert.equal(r.text, refText);
    assert.equal(r.segments.length, 1);
    assert.equal(r.segments[0].text, refText);
    assert.ok(Math.abs(r.duration - wavSeconds) < 1e-3);
    assert.ok(Math.abs(r.segments[0].end - wavSeconds) < 1e-3);
  });
  await test('transcription verbose_json words', async () => {
    const r = await asr.audio.transcriptions.create({
      model: 'whisper-1', file: await file(), response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'] });
    assert.equal(r.text, refText);
    assert.ok(Array.isArray(r.words), JSON.stringify(r));
    // The demo model's transcript is white space only, so no words; each word the server sends is timed in order.
    assert.equal(r.words.length, refText.split(/\s+/).filter((w) => w.length > 0).length);
    let last = 0;
    for (const w of r.words) {
      assert.ok(w.start >= last && w.end >= w.start && w.end <= wavSeconds + 1e-6, JSON.stringify(w));
      last = w.start;
    }
  });
  await test('transcription stream: deltas join to the transcript', async () => {
    const s = await asr.audio.transcriptions.create({ model: 'whisper-1', file: await file(), stream: true });
    let joined = '', done = null;
    for await (const ev of s) {
      if (ev.type === 'transcript.text.delta') joined += ev.delta;
      if (ev.type === 'transcript.text.done') done = ev;
    }
    assert.equal(joined, refText);
    assert.equal(done?.text, refText);
  });

  const say = (fmt, extra = {}) => speech.audio.speech.create({
    model: 'demo', voice: kVoice, input: kText, response_format: fmt, temperature: 0, seed: 0, ...extra });
  const bytes = async (r) => Buffer.from(await r.arrayBuffer());
  let wavBytes = null;
  await test('speech pcm = lfmvox tts, wav data = pcm', async () => {
    const pcm = await bytes(await say('pcm'));
    assert.equal(pcm.length, refPcm.length);
    assert.ok(pcm.equals(refPcm), 'pcm differs from lfmvox tts');
    wavBytes = await bytes(await say('wav'));
    assert.equal(wavBytes.subarray(8, 16).toString('latin1'), 'WAVEfmt ');
    assert.ok(wavData(wavBytes).equals(refPcm), 'wav data differs from the pcm');
    const alloy = await bytes(await speech.audio.speech.create({
      model: 'tts-1', voice: 'alloy', input: kText, response_format: 'pcm', temperature: 0, seed: 0 }));
    assert.ok(alloy.equals(refPcm), 'alloy is the US female voice');
  });
  const magic = { flac: (b) => b.subarray(0, 4).toString('latin1') === 'fLaC',
                  opus: (b) => b.subarray(0, 4).toString('latin1') === 'OggS' && b.includes('OpusHead'),
                  mp3: (b) => b.subarray(0, 3).toString('latin1') === 'ID3' || (b[0] === 0xff && (b[1] & 0xe0) === 0xe0),
                  aac: (b) => b[0] === 0xff && (b[1] & 0xf6) === 0xf0 };  // ADTS: syncword 0xFFF, layer 0
  for (const fmt of Object.keys(magic)) {
    await test(`speech ${fmt}: the format's magic`, async () => {
      let b;
      try {
        b = await bytes(await say(fmt));
      } catch (e) {
        // A build whose libsndfile lacks the encoder answers a clear 400 (server_test checks which).
        assert.ok(e instanceof APIError && e.status === 400 && e.code === 'unsupported_format', String(e));
        console.log(`     (${fmt}: ${e.message})`);
        return;
      }
      assert.ok(b.length > 100 && magic[fmt](b), `${fmt}: ${b.subarray(0, 8).toString('hex')}`);
    });
  }
  await test('speech speed 2: half the samples (tempo, not pitch: server_test checks the samples)', async () => {
    const fast = await bytes(await say('pcm', { speed: 2 }));
    assert.ok(Math.abs(fast.length / 2 - refPcm.length / 4) <= 1, `${fast.length / 2} vs ${refPcm.length / 4}`);
  });
  await test('speech stream_format sse: deltas decode to the pcm', async () => {
    const body = await (await say('pcm', { stream_format: 'sse' })).text();
    const events = sseData(body).map((d) => JSON.parse(d));
    assert.equal(events.at(-1).type, 'speech.audio.done');
    const joined = Buffer.concat(events.slice(0, -1).map((e) => {
      assert.equal(e.type, 'speech.audio.delta');
      return Buffer.from(e.audio, 'base64');
    }));
    assert.ok(joined.equals(refPcm));
  });

  const messages = [{ role: 'user', content: 'Say something.' }];
  await test('chat text: stream deltas = non-stream content', async () => {
    const r = await asr.chat.completions.create({ model: 'demo', messages });
    const content = r.choices[0].message.content;
    assert.ok(content.length > 0);
    const s = await asr.chat.completions.create({ model: 'demo', messages, stream: true, stream_options: { include_usage: true } });
    let joined = '', finish = null, usage = null;
    for await (const c of s) {
      if (c.choices.length) {
        joined += c.choices[0].delta.content ?? '';
        finish = c.choices[0].finish_reason ?? finish;
      }
      if (c.usage) usage = c.usage;
    }
    assert.equal(joined, content);
    assert.equal(finish, r.choices[0].finish_reason);
    assert.equal(usage.completion_tokens, r.usage.completion_tokens);
  });
  await test('chat input_audio: stream = non-stream', async () => {
    const m = [{ role: 'user', content: [{ type: 'text', text: 'Answer:' },
                                         { type: 'input_audio', input_audio: { data: wav.toString('base64'), format: 'wav' } }] }];
    const r = await asr.chat.completions.create({ model: 'demo', messages: m });
    let joined = '';
    for await (const c of await asr.chat.completions.create({ model: 'demo', messages: m, stream: true }))
      joined += c.choices[0]?.delta.content ?? '';
    assert.ok(r.choices[0].message.content.length > 0);
    assert.equal(joined, r.choices[0].message.content);
  });
  await test('chat audio out: stream pcm16 = non-stream pcm16, wav carries the same data', async () => {
    const req = { model: 'demo', messages: [{ role: 'user', content: kText }], modalities: ['text', 'audio'],
                  temperature: 0, seed: 0 };
    const r = await speech.chat.completions.create({ ...req, audio: { voice: 'alloy', format: 'pcm16' } });
    const pcm = Buffer.from(r.choices[0].message.audio.data, 'base64');
    assert.ok(pcm.length > 0 && pcm.length % 2 === 0);
    let streamed = [], transcript = '';
    for await (const c of await speech.chat.completions.create({ ...req, audio: { voice: 'alloy', format: 'pcm16' }, stream: true })) {
      const a = c.choices[0]?.delta?.audio;
      if (a?.data) streamed.push(Buffer.from(a.data, 'base64'));
      if (a?.transcript) transcript += a.transcript;
    }
    assert.ok(Buffer.concat(streamed).equals(pcm), 'streamed audio differs');
    assert.equal(transcript, r.choices[0].message.audio.transcript);
    const w = await speech.chat.completions.create({ ...req, audio: { voice: 'alloy', format: 'wav' } });
    assert.ok(wavData(Buffer.from(w.choices[0].message.audio.data, 'base64')).equals(pcm));
  });
  await test('chat audio multi-turn: an assistant message by its audio id', async () => {
    const first = { role: 'user', content: kText };
    const req = { model: 'demo', modalities: ['text', 'audio'], temperature: 0, seed: 0,
                  audio: { voice: 'alloy', format: 'pcm16' } };
    const r1 = await speech.chat.completions.create({ ...req, messages: [first] });
    const id = r1.choices[0].message.audio.id;
    const turn2 = [first, { role: 'assistant', audio: { id } }, { role: 'user', content: 'Again.' }];
    const r2 = await speech.chat.completions.create({ ...req, messages: turn2 });
    const again = await speech.chat.completions.create({ ...req, messages: turn2 });
    assert.ok(Buffer.from(r2.choices[0].message.audio.data, 'base64').length > 0);
    assert.equal(r2.choices[0].message.audio.data, again.choices[0].message.audio.data);
    await assert.rejects(
      speech.chat.completions.create({ ...req, messages: [first, { role: 'assistant', audio: { id: 'audio_x' } }] }),
      (e) => e.status === 400 && e.param === 'messages[1].audio.id');
  });

  const clip24 = wavData(readFileSync(clip24Path));
  await test('realtime (OpenAIRealtimeWS): audio = lfmvox chat, transcript deltas = done', async () => {
    const r = await realtimeTurn(OpenAI, OpenAIRealtimeWS, { port: tts.port, key: kKey, pcm: clip24 });
    assert.equal(r.status, 'completed');
    assert.deepEqual(r.types.slice(0, 4), ['session.created', 'session.updated', 'input_audio_buffer.committed',
                                           'conversation.item.created']);
    assert.equal(r.audio.length, refChat.length);
    assert.ok(r.audio.equals(refChat), 'realtime speech differs from lfmvox chat');
    assert.equal(r.transcript, r.transcriptDone);
  });
  await test('realtime: response.cancel stops the answer; what came is its start', async () => {
    const r = await realtimeTurn(OpenAI, OpenAIRealtimeWS, { port: tts.port, key: kKey, pcm: clip24, cancel: true });
    assert.equal(r.status, 'cancelled');
    assert.ok(r.audio.length < refChat.length, `${r.audio.length} of ${refChat.length} bytes`);
    assert.ok(r.audio.equals(refChat.subarray(0, r.audio.length)));
  });
  await test('realtime input transcription = lfmvox asr of the turn, deltas = completed', async () => {
    const r = await realtimeTurn(OpenAI, OpenAIRealtimeWS, { port: text.port, key: kKey, pcm: clip24, transcribe: true });
    assert.equal(r.status, 'completed');
    assert.equal(r.input.completed.transcript, refText24);
    assert.equal(r.input.transcript, refText24);
    assert.equal(r.input.completed.item_id, r.committedId);
  });
  await test('realtime: a wrong key is refused', async () => {
    await assert.rejects(realtimeTurn(OpenAI, OpenAIRealtimeWS, { port: tts.port, key: 'wrong', pcm: clip24 }),
                         /realtime error: .*401/);
  });

  await test('errors: the OpenAI error object', async () => {
    await assert.rejects(speech.audio.speech.create({ model: 'demo', voice: kVoice, input: '' }),
                         (e) => e instanceof APIError && e.status === 400 && e.type === 'invalid_request_error' &&
                                e.param === 'input' && /empty/.test(e.message));
    await assert.rejects(speech.audio.speech.create({ model: 'demo', voice: 'nobody', input: kText }),
                         (e) => e.status === 400 && e.param === 'voice');
    await assert.rejects(asr.chat.completions.create({ model: 'demo', messages: [] }),
                         (e) => e.status === 400 && e.param === 'messages');
    await assert.rejects(client(tts.port, 'wrong').models.list(),
                         (e) => e.status === 401 && e.code === 'invalid_api_key' && e.type === 'authentication_error');
    const models = await speech.models.list();
    assert.equal(models.data.length, 1);
    assert.equal(models.data[0].id, 'demo_tts');
  });
} finally {
  tts.child.kill('SIGTERM');
  text.child.kill('SIGTERM');
}
process.exit(finish());

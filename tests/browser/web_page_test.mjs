// The page `lfmvox serve` serves at `/` (apps/server/web), in Debian's headless Chromium driven by
// playwright-core, with a fake microphone playing tests/data/inputs/question.wav (then 0.8 s of silence,
// looped). Model: the steered demo checkpoint tests/server_test.cc and tests/clients use (greedy, seed 0:
// server_test checks the realtime answer bit for bit against the library). Checks:
// - the files' Content-Type, the Content-Security-Policy, no file outside the table, 405/404;
// - a WebSocket from another site's page (Origin) is refused with 403;
// - push to talk (`?vad=0`): the answer's transcript deltas join to its done transcript and equal, with
//   its speech bytes, what a fresh realtime session answers for the exact PCM16 the page committed; every
//   received sample is played (the playback worklet's count), none dropped; Send during an answer cancels
//   it, stops playback and truncates to the ms heard before the next turn goes;
// - server VAD: the question's next loop cancels the answer in flight (turn_detected), playback stops,
//   each received sample is heard or dropped, the truncation is what was heard;
// - turn detection the server refuses (semantic_vad): the page falls back to push to talk;
// - with --api-key, the page passes the key as the `openai-insecure-api-key.KEY` subprotocol; a wrong
//   key is refused (401) and the page says so.
//   node web_page_test.mjs LFMVOX MAKE_CHECKPOINT TEST_DATA_DIR WORK_DIR   (run_web_test.sh)
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import http from 'node:http';
import path from 'node:path';
import { demoCheckpoint, serve as serveAt, testRunner } from '../clients/serve.mjs';

const [lfmvox, makeCheckpoint, dataDir, work] = process.argv.slice(2).map((p) => path.resolve(p));
const require = createRequire(path.join(work, 'package.json'));
const { chromium } = require('playwright-core');

const kMaxNew = '40';  // as server_test and tests/clients
const kRate = 24000;

const serve = (model, extra = []) => serveAt(lfmvox, model, ['--max-new', kMaxNew, '--threads', '1', ...extra]);

// question.wav with 0.8 s of silence after it (the same format), for the fake microphone: looped, the
// speech starts again 0.3 s after server VAD's 500 ms of silence ended the turn, over the answer.
function micWav(file) {
  const wav = readFileSync(path.join(dataDir, 'inputs/question.wav'));
  let at = 12;
  while (wav.subarray(at, at + 4).toString('latin1') !== 'data') at += 8 + wav.readUInt32LE(at + 4);
  const fmt = wav.subarray(0, at), data = wav.subarray(at + 8, at + 8 + wav.readUInt32LE(at + 4));
  const silence = Buffer.alloc(Math.round(0.8 * wav.readUInt32LE(24)) * wav.readUInt16LE(22) * 2);
  const head = Buffer.alloc(8);
  head.write('data', 0, 'latin1');
  head.writeUInt32LE(data.length + silence.length, 4);
  const out = Buffer.concat([fmt, head, data, silence]);
  out.writeUInt32LE(out.length - 8, 4);
  writeFileSync(file, out);
}

function get(port, p, { method = 'GET', headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, method, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode, headers: res.headers, body: Buffer.alloc(0) });
    });
    req.on('error', reject);
    req.end();
  });
}

const { test, finish } = testRunner();

const model = demoCheckpoint(makeCheckpoint, dataDir, path.join(work, 'demo_tts'), ['Hello there.', 'US female']);
const mic = path.join(work, 'mic.wav');
micWav(mic);
const server = await serve(model);
const kKey = 'test-key';
const keyed = await serve(model, ['--api-key', kKey]);
// (the last --max-new counts) Long enough that an answer is still being generated when the page
// sends its cancel: with 400 the demo model's whole answer (21 s of speech) was out before the
// push-to-talk test's click, ~0.5 s after playback began, on a fast CPU.
const vad = await serve(model, ['--max-new', '1600']);
const base = `http://127.0.0.1:${server.port}`;
const args = ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${mic}`,
              '--autoplay-policy=no-user-gesture-required', '--disable-gpu', '--disable-quic', '--no-first-run',
              '--disable-background-networking', '--disable-component-update', '--disable-sync'];
if (process.getuid && process.getuid() === 0) args.push('--no-sandbox');
let browser = null;

// Opens the page in a fresh context; collects console errors (CSP violations among them).
async function open(query, port = server.port) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`); });
  await page.goto(`http://127.0.0.1:${port}/${query}`);
  return { context, page, problems };
}
const stats = (page) => page.evaluate(() => JSON.parse(JSON.stringify(window.lfmvoxStats)));
// open(), then Start, until the page has chosen its turn-detection mode.
async function openAndStart(query, port = server.port) {
  const opened = await open(query, port);
  await opened.page.click('#start');
  await opened.page.waitForFunction(() => window.lfmvoxStats.mode !== '', null, { timeout: 30000 });
  return opened;
}

try {
  await test('files: Content-Type, CSP, nothing else', async () => {
    const types = { '/': 'text/html; charset=utf-8', '/index.html': 'text/html; charset=utf-8',
                    '/app.js': 'text/javascript; charset=utf-8', '/style.css': 'text/css; charset=utf-8',
                    '/capture-worklet.js': 'text/javascript; charset=utf-8',
                    '/playback-worklet.js': 'text/javascript; charset=utf-8', '/favicon.svg': 'image/svg+xml' };
    const root = await get(server.port, '/');
    for (const [p, type] of Object.entries(types)) {
      const r = await get(server.port, p);
      assert.equal(r.status, 200, p);
      assert.equal(r.headers['content-type'], type, p);
      assert.equal(r.headers['x-content-type-options'], 'nosniff', p);
      const csp = r.headers['content-security-policy'];
      assert.match(csp, /^default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';/, p);
      assert.doesNotMatch(csp, /unsafe|\*|data:|blob:/, p);
      assert.match(csp, /frame-ancestors 'none'/, p);
      assert.ok(r.body.length > 100, p);
    }
    assert.ok((await get(server.port, '/index.html')).body.equals(root.body));
    assert.match(root.body.toString(), /<script src="app.js" defer><\/script>/);
    assert.doesNotMatch(root.body.toString(), /<script>|\son[a-z]+=|style=/, 'no inline code for the CSP to refuse');
    for (const p of ['/../../etc/passwd', '/%2e%2e/README.md', '/app.js/', '/web/app.js', '/index.htm', '/CMakeLists.txt'])
      assert.equal((await get(server.port, p)).status, 404, p);
    assert.equal((await get(server.port, '/', { method: 'POST' })).status, 405);
  });

  await test('realtime: a WebSocket from another site is refused (403), same origin upgrades (101)', async () => {
    const ws = { Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Version': '13',
                 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==' };
    const evil = await get(server.port, '/v1/realtime', { headers: { ...ws, Origin: 'http://evil.example' } });
    assert.equal(evil.status, 403);
    assert.equal(JSON.parse(evil.body).error.code, 'cross_origin');
    const other = await get(server.port, '/v1/realtime', { headers: { ...ws, Origin: `http://localhost:${server.port}` } });
    assert.equal(other.status, 403, 'another host name is another origin');
    const same = await get(server.port, '/v1/realtime', { headers: { ...ws, Origin: base } });
    assert.equal(same.status, 101);
  });

  browser = await chromium.launch({ executablePath: process.env.LFMVOX_CHROMIUM || '/usr/bin/chromium', headless: true, args });

  await test('worklets at 44.1 kHz: capture resamples to 24 kHz PCM16, playback resamples and counts', async () => {
    const { context, page, problems } = await open('?vad=0');
    const r = await page.evaluate(async () => {
      const rate = 44100, step = rate / 24000;
      const lerp = (x, t) => {
        const i = Math.floor(t), f = t - i;
        return f > 0 ? x[i] + f * (x[i + 1] - x[i]) : x[i];
      };
      // Capture: half a second of a 440 Hz sine through lfmvox-capture.
      const cap = new OfflineAudioContext(1, rate / 2, rate);
      await cap.audioWorklet.addModule('capture-worklet.js');
      const x = new Float32Array(rate / 2);
      for (let n = 0; n < x.length; ++n) x[n] = 0.5 * Math.sin((2 * Math.PI * 440 * n) / rate);
      const buf = cap.createBuffer(1, x.length, rate);
      buf.copyToChannel(x, 0);
      const src = new AudioBufferSourceNode(cap, { buffer: buf });
      const node = new AudioWorkletNode(cap, 'lfmvox-capture');
      const chunks = [];
      node.port.onmessage = (e) => chunks.push(e.data);
      src.connect(node).connect(cap.destination);
      src.start();
      await cap.startRendering();
      const want = Math.floor((x.length - 1) / step / 960);  // whole 40 ms chunks
      for (let i = 0; i < 1000 && chunks.length < want; ++i) await new Promise((ok) => setTimeout(ok, 20));
      let capErr = 0, captured = 0;
      for (const c of chunks) {
        for (let i = 0; i < c.length; ++i, ++captured) {
          capErr = Math.max(capErr, Math.abs(c[i] - Math.round(lerp(x, captured * step) * 32768)));
        }
      }
      // Playback: 12 000 samples of 24 kHz speech-like signal through lfmvox-playback into 0.7 s at 44.1 kHz.
      const play = new OfflineAudioContext(1, Math.round(rate * 0.7), rate);
      await play.audioWorklet.addModule('playback-worklet.js');
      const pb = new AudioWorkletNode(play, 'lfmvox-playback', { numberOfInputs: 0, outputChannelCount: [1] });
      const reports = [];
      pb.port.onmessage = (e) => reports.push(e.data);
      pb.connect(play.destination);
      const s = new Float32Array(12000);
      for (let n = 0; n < s.length; ++n) s[n] = 0.1 + 0.5 * Math.cos((2 * Math.PI * 300 * n) / 24000);
      // Offline rendering outruns any message, so it waits at its first quantum until the worklet has
      // queued the chunk (its report of it).
      const queued = new Promise((ok) => {
        pb.port.onmessage = (e) => {
          reports.push(e.data);
          if (e.data.buffered === s.length) ok();
        };
      });
      play.suspend(128 / rate).then(async () => {
        pb.port.postMessage(s.slice());
        await queued;
        play.resume();
      });
      const out = (await play.startRendering()).getChannelData(0);
      // Messages from the rendering thread may trail startRendering; wait for the one after the last sample.
      for (let i = 0; i < 1000 && !reports.some((m) => m.buffered === 0 && m.played > 0); ++i) await new Promise((ok) => setTimeout(ok, 20));
      const q = out.findIndex((v) => v !== 0);  // the frame the queued samples reached the worklet
      let playErr = 0, k = 0;
      for (; q + k < out.length && k / step <= s.length - 1; ++k) {
        playErr = Math.max(playErr, Math.abs(out[q + k] - lerp(s, k / step)));
      }
      let tail = 0;
      for (let i = q + k + 1; i < out.length; ++i) tail = Math.max(tail, Math.abs(out[i]));
      const last = reports.at(-1) || {};
      return { captured, want, capErr, q, k, playErr, tail, played: last.played, buffered: last.buffered };
    });
    // Capture: the chunks hold every output sample up to the last whole chunk, each within 1 LSB of the
    // linear interpolation (t is summed step by step, so rounding may differ by one).
    assert.equal(r.captured, r.want * 960, JSON.stringify(r));
    assert.ok(r.capErr <= 1, JSON.stringify(r));
    // Playback: the output is the linear interpolation (float32 arithmetic: 1e-6), then silence; the
    // worklet counts every queued sample as played.
    assert.ok(r.q >= 0 && r.k >= 22040, JSON.stringify(r));
    assert.ok(r.playErr < 1e-6, JSON.stringify(r));
    assert.equal(r.tail, 0, JSON.stringify(r));
    assert.equal(r.played, 12000, JSON.stringify(r));
    assert.equal(r.buffered, 0, JSON.stringify(r));
    console.log(`     capture: ${r.captured} samples, max error ${r.capErr} LSB; playback: ${r.k} frames from frame ` +
                `${r.q}, max error ${r.playErr.toExponential(1)}, played ${r.played}`);
    assert.deepEqual(problems, []);
    await context.close();
  });

  await test('push to talk: transcript and speech = a fresh session on the committed PCM, all played', async () => {
    const { context, page, problems } = await open('?vad=0');
    await page.click('#start');
    await page.waitForFunction(() => window.lfmvoxStats.mode === 'manual', null, { timeout: 30000 });
    // Three seconds of the question, then Send.
    await page.waitForFunction((n) => window.lfmvoxStats.sentSamples >= n, 3 * kRate, { timeout: 30000 });
    await page.click('#send');
    await page.waitForFunction(() => window.lfmvoxStats.responses.length === 1, null, { timeout: 300000 });
    await page.waitForFunction(() => {
      const s = window.lfmvoxStats;
      return s.bufferedSamples === 0 && s.playedSamples + s.discardedSamples === s.receivedSamples;
    }, null, { timeout: 60000 });
    const s = await stats(page);
    const r = s.responses[0];
    assert.equal(r.status, 'completed');
    assert.equal(r.transcript, r.done_transcript, 'deltas join to the done transcript');
    assert.equal(s.events['response.output_audio_transcript.delta'] > 0, true, 'transcript deltas arrive');
    const audio = Buffer.concat(r.audio.split('|').filter(Boolean).map((b) => Buffer.from(b, 'base64')));
    assert.equal(audio.length, 2 * r.samples);
    assert.ok(r.samples > 0, 'speech arrives');
    assert.equal(s.receivedSamples, r.samples);
    assert.equal(s.playedSamples, s.receivedSamples, 'every received sample is played');
    assert.equal(s.discardedSamples, 0);
    assert.equal(s.committed.length, 1);
    assert.deepEqual(s.errors, []);
    const committed = s.committed[0].split('|');
    const sent = committed.reduce((n, b) => n + Buffer.from(b, 'base64').length / 2, 0);
    assert.ok(sent >= 3 * kRate, `${sent} samples committed`);
    // The reference: a fresh session, in the same page, answering the exact PCM the page committed.
    const ref = await page.evaluate((chunks) => new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://${location.host}/v1/realtime`);
      let transcript = '', audio = [], status = '';
      ws.onerror = () => reject(new Error('reference socket failed'));
      ws.onmessage = (m) => {
        const e = JSON.parse(m.data);
        if (e.type === 'session.created') {
          ws.send(JSON.stringify({ type: 'session.update', session: { audio: { input: { turn_detection: null } } } }));
          for (const c of chunks) ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: c }));
          ws.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
          ws.send(JSON.stringify({ type: 'response.create' }));
        }
        if (e.type === 'error') reject(new Error(JSON.stringify(e.error)));
        if (e.type === 'response.output_audio_transcript.delta') transcript += e.delta;
        if (e.type === 'response.output_audio.delta') audio.push(e.delta);
        if (e.type === 'response.done') {
          status = e.response.status;
          ws.close();
          resolve({ transcript, audio: audio.join('|'), status });
        }
      };
    }), committed);
    assert.equal(ref.status, 'completed');
    assert.equal(r.transcript, ref.transcript, 'the page shows what the server answers for that audio');
    const refAudio = Buffer.concat(ref.audio.split('|').filter(Boolean).map((b) => Buffer.from(b, 'base64')));
    assert.equal(audio.length, refAudio.length);
    assert.ok(audio.equals(refAudio), 'the page received the reference speech');
    const shown = await page.$$eval('#transcript .assistant', (ps) => ps.map((p) => p.textContent));
    assert.deepEqual(shown, [r.transcript], 'the transcript is on the page');
    console.log(`     committed ${(sent / kRate).toFixed(2)} s; answer ${r.samples} samples, ` +
                `${r.transcript.length} transcript chars, played ${s.playedSamples}`);
    assert.deepEqual(problems, []);
    await context.close();
  });

  await test('server VAD: speaking over the answer cancels it, stops playback, truncates to what was heard', async () => {
    const { context, page, problems } = await openAndStart('', vad.port);
    assert.equal((await stats(page)).mode, 'server_vad');
    // The first answer is long (vad's --max-new): the question's next loop starts while it is generated.
    await page.waitForFunction(() => window.lfmvoxStats.responses.length > 0 &&
                                     window.lfmvoxStats.interrupts.length > 0, null, { timeout: 300000 });
    await page.waitForFunction(() => window.lfmvoxStats.truncated.length > 0, null, { timeout: 30000 });
    const s = await stats(page);
    const r = s.responses[0], cut = s.interrupts[0];
    console.log(`     speech started ${s.speechStarted}x; answer 1 ${r.status} (${r.reason}) after ${r.samples} samples: ` +
                `played ${cut.played}, dropped ${cut.cleared} queued + ${r.late} late; truncated to ` +
                `${s.truncations[0].audio_end_ms} ms`);
    assert.deepEqual(s.errors, []);
    assert.ok(s.speechStarted >= 2 && s.events['input_audio_buffer.committed'] >= 1, JSON.stringify(s.events));
    assert.equal(r.status, 'cancelled', 'barge-in cancels the answer in flight');
    assert.equal(r.reason, 'turn_detected');
    assert.equal(r.transcript, r.done_transcript);
    assert.equal(cut.item_id, r.item_id);
    assert.equal(cut.buffered, 0, 'playback stopped: nothing left queued');
    assert.equal(cut.played + cut.cleared + r.late, r.samples, 'each received sample was heard or dropped');
    assert.ok(r.samples > 0 && cut.played < r.samples, 'it was cut mid-answer');
    const ms = Math.floor((cut.played * 1000) / kRate);
    assert.deepEqual(s.truncations[0], { item_id: r.item_id, audio_end_ms: ms }, 'truncated to what was heard');
    assert.deepEqual(s.truncated[0], s.truncations[0], 'the server confirms the truncation');
    assert.equal(s.receivedSamples, s.playedSamples + s.discardedSamples + s.bufferedSamples);
    assert.equal(await page.locator('#transcript .assistant.cancelled').count() >= 1, true);
    assert.deepEqual(problems, []);
    await context.close();
  });

  await test('push to talk: Send during the answer cancels it, stops playback, truncates, then sends', async () => {
    const { context, page, problems } = await open('?vad=0', vad.port);
    await page.click('#start');
    await page.waitForFunction(() => window.lfmvoxStats.mode === 'manual', null, { timeout: 30000 });
    await page.waitForFunction((n) => window.lfmvoxStats.sentSamples >= n, 3 * kRate, { timeout: 30000 });
    await page.click('#send');
    await page.waitForFunction((n) => window.lfmvoxStats.playedSamples >= n, kRate / 5, { timeout: 300000 });
    await page.click('#send');  // 200 ms into a 1600-token answer
    await page.waitForFunction(() => window.lfmvoxStats.truncated.length > 0 &&
                                     window.lfmvoxStats.events['response.created'] === 2, null, { timeout: 300000 });
    const s = await stats(page);
    const r = s.responses[0], cut = s.interrupts[0];
    console.log(`     answer 1 ${r.status} (${r.reason}) after ${r.samples} samples: played ${cut.played}, ` +
                `dropped ${cut.cleared} queued + ${r.late} late; truncated to ${s.truncations[0].audio_end_ms} ms`);
    assert.deepEqual(s.errors, []);
    assert.equal(r.status, 'cancelled');
    assert.equal(r.reason, 'client_cancelled');
    assert.equal(cut.item_id, r.item_id);
    assert.equal(cut.buffered, 0, 'playback stopped');
    assert.equal(cut.played + cut.cleared + r.late, r.samples);
    assert.ok(cut.played >= kRate / 5 && cut.played < r.samples, JSON.stringify(cut));
    const ms = Math.floor((cut.played * 1000) / kRate);
    assert.deepEqual(s.truncations, [{ item_id: r.item_id, audio_end_ms: ms }]);
    assert.deepEqual(s.truncated, s.truncations, 'the truncate came before the next turn');
    assert.equal(s.committed.length, 2, 'the second turn went out after the truncation');
    assert.deepEqual(problems, []);
    await context.close();
  });

  await test('semantic_vad is taken as asked; a turn detection the server lacks falls back to push to talk', async () => {
    {
      const { context, page, problems } = await openAndStart('?vad=semantic_vad');
      const s = await stats(page);
      assert.equal(s.mode, 'semantic_vad');
      assert.equal(s.errors.length, 0);
      assert.deepEqual(problems, []);
      await context.close();
    }
    const { context, page, problems } = await openAndStart('?vad=neural_vad');
    const s = await stats(page);
    assert.equal(s.mode, 'manual');
    assert.equal(s.errors.length, 1);
    assert.equal(s.errors[0].code, 'unsupported_turn_detection');
    assert.equal(await page.isEnabled('#send'), true);
    assert.deepEqual(problems, []);
    await context.close();
  });

  await test('an API key: the page sends it as a subprotocol; a wrong one is refused', async () => {
    const ws = { Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Version': '13',
                 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==' };
    const up = (key) => get(keyed.port, '/v1/realtime',
                            { headers: { ...ws, 'Sec-WebSocket-Protocol': `realtime, openai-insecure-api-key.${key}` } });
    const good = await up(kKey);
    assert.equal(good.status, 101);
    assert.equal(good.headers['sec-websocket-protocol'], 'realtime');
    assert.equal((await up('wrong')).status, 401);
    assert.equal((await get(keyed.port, '/')).status, 200, 'the page itself needs no key');
    {
      const { context, page, problems } = await open('?vad=0', keyed.port);
      await page.fill('#key', kKey);
      await page.click('#start');
      await page.waitForFunction(() => window.lfmvoxStats.mode === 'manual', null, { timeout: 30000 });
      const s = await stats(page);
      assert.equal(s.events['session.created'], 1);
      assert.deepEqual(s.errors, []);
      assert.deepEqual(problems, []);
      await context.close();
    }
    const { context, page } = await open('?vad=0', keyed.port);
    await page.fill('#key', 'wrong');
    await page.click('#start');
    await page.waitForFunction(() => /refused/.test(document.getElementById('status').textContent), null, { timeout: 30000 });
    const s = await stats(page);
    assert.equal(s.events['session.created'], undefined);
    assert.equal(s.sentSamples, 0);
    await context.close();
  });
} finally {
  if (browser) await browser.close();
  server.child.kill('SIGTERM');
  keyed.child.kill('SIGTERM');
  vad.child.kill('SIGTERM');
}
process.exit(finish());

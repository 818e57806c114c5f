// Abusive clients against `lfmvox serve`: N concurrent clients for S seconds send oversized and
// truncated bodies, truncated multipart, invalid and deeply nested JSON, random bytes,
// slowloris headers and speech streams they drop halfway, while one healthy client repeats a greedy
// speech request and checks every reply is byte for byte the one it got with the server to itself.
// Afterwards the server must still answer, and its RSS (/proc/PID/status) may not have grown past the
// bound. No npm package needed.
//   node abuse.mjs LFMVOX MODEL_DIR CLIENTS SECONDS [RSS_GROWTH_MB=64]
// Prints one JSON line of the numbers; exits 1 on any failure.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { serve } from './serve.mjs';

const [lfmvox, model, nArg, sArg, growthArg] = process.argv.slice(2);
const clients = Number(nArg ?? 100), seconds = Number(sArg ?? 60), growthMb = Number(growthArg ?? 64);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const { child: server, port } = await serve(lfmvox, model, ['--max-new', '40', '--threads', '1', '--max-queued', '64']);
const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))[1]) / 1024;

// One raw exchange: writes `parts` (Buffers or async steps), resolves with the HTTP status of the reply
// (0 when the server closed without one) or 'dropped' when the client hung up first.
function exchange(parts, { dropAfterBytes = 0, timeoutMs = 40000 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = Buffer.alloc(0), done = false;
    const finish = (v) => { if (!done) { done = true; s.destroy(); resolve(v); } };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    s.on('data', (d) => {
      got = Buffer.concat([got, d]);
      if (dropAfterBytes && got.length >= dropAfterBytes) { clearTimeout(timer); finish('dropped'); }
    });
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got.toString('latin1', 0, 16));
      finish(m ? Number(m[1]) : 0);
    });
    s.on('connect', async () => {
      for (const p of parts) {
        if (done) return;
        if (typeof p === 'function') await p(s); else s.write(p);
      }
    });
  });
}
const post = (path, type, body, extra = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n${extra}\r\n`;
const speechBody = JSON.stringify({ model: 'demo', input: 'Hello there.', voice: 'US female', response_format: 'pcm',
                                    temperature: 0, seed: 0 });

const kinds = {
  oversized: () => exchange([post('/v1/audio/speech', 'application/json', { length: 1 << 30 }), randomBytes(1 << 20)]),
  large_body: () => exchange([post('/v1/chat/completions', 'application/json', { length: 8 << 20 }),
                              Buffer.alloc(8 << 20, 0x5b)]),
  truncated_body: () => exchange([post('/v1/audio/speech', 'application/json', { length: 1000 }), '{"input":"hi', (s) => s.end()]),
  truncated_multipart: () => {
    const b = '--XY\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF' + 'x'.repeat(500);
    return exchange([post('/v1/audio/transcriptions', 'multipart/form-data; boundary=XY', b), b]);
  },
  invalid_json: () => exchange([post('/v1/chat/completions', 'application/json', '{"messages": [}'), '{"messages": [}']),
  deep_json: () => {
    const b = '{"input":' + '['.repeat(200000) + ']'.repeat(200000) + '}';
    return exchange([post('/v1/audio/speech', 'application/json', b), b]);
  },
  random_bytes: () => exchange([randomBytes(4096)]),
  slowloris: () => exchange(['POST /v1/audio/speech HTTP/1.1\r\n', async (s) => {
    for (let i = 0; i < 40 && !s.destroyed; ++i) { s.write(`X-A${i}: b\r\n`); await sleep(1000); }
  }]),
  drop_stream: () => exchange([post('/v1/audio/speech', 'application/json', speechBody.replace('"pcm"', '"pcm","stream_format":"sse"')),
                               speechBody.replace('"pcm"', '"pcm","stream_format":"sse"')], { dropAfterBytes: 300 }),
  drop_nonstream: () => {
    const b = speechBody.replace('"pcm"', '"flac"');
    return exchange([post('/v1/audio/speech', 'application/json', b), b, (s) => s.destroy()]);
  },
};

// The healthy client: the whole body of one greedy pcm speech request (retried on 503, which a full
// server may answer).
async function healthy() {
  for (;;) {
    const r = await fetch(`http://127.0.0.1:${port}/v1/audio/speech`,
                          { method: 'POST', headers: { 'content-type': 'application/json' }, body: speechBody });
    const b = Buffer.from(await r.arrayBuffer());
    if (r.status === 503) { stats.healthy_503 += 1; await sleep(50); continue; }
    return { status: r.status, body: b };
  }
}

const stats = { clients, seconds, healthy_runs: 0, healthy_mismatches: 0, healthy_503: 0, abusive_requests: 0,
                by_kind: {}, server_5xx: 0 };
const alone = await healthy();
if (alone.status !== 200 || alone.body.length === 0) throw new Error(`healthy request alone: ${alone.status}`);
for (let i = 0; i < 3; ++i) await healthy();  // warm: the allocator's steady state
const rssBefore = rssMb();
let peak = rssBefore;
const sampler = setInterval(() => { peak = Math.max(peak, rssMb()); }, 200);

const end = Date.now() + seconds * 1000;
const names = Object.keys(kinds);
const abusers = Array.from({ length: clients }, async (_, i) => {
  for (let k = i; Date.now() < end; ++k) {
    const name = names[k % names.length];
    const r = await kinds[name]();
    stats.abusive_requests += 1;
    const key = `${name}:${r}`;
    stats.by_kind[key] = (stats.by_kind[key] ?? 0) + 1;
    if (typeof r === 'number' && r >= 500 && r !== 503) stats.server_5xx += 1;
  }
});
const good = (async () => {
  while (Date.now() < end) {
    const r = await healthy();
    stats.healthy_runs += 1;
    if (r.status !== 200 || !r.body.equals(alone.body)) stats.healthy_mismatches += 1;
  }
})();
await Promise.all([...abusers, good]);
clearInterval(sampler);
// Once the last connections are gone: the lowest RSS over 5 s (freed memory goes back as the
// allocator trims it).
await sleep(2000);
const after = await healthy();
let rssAfter = rssMb();
for (let i = 0; i < 10; ++i, await sleep(500)) rssAfter = Math.min(rssAfter, rssMb());
Object.assign(stats, { rss_before_mb: +rssBefore.toFixed(1), rss_peak_mb: +peak.toFixed(1), rss_after_mb: +rssAfter.toFixed(1),
                       up_after: after.status === 200 && after.body.equals(alone.body) });
server.kill('SIGTERM');
console.log(JSON.stringify(stats));
const ok = stats.up_after && stats.healthy_mismatches === 0 && stats.server_5xx === 0 && rssAfter - rssBefore <= growthMb &&
           stats.healthy_runs > 0;
if (!ok) console.log('FAIL: ' + JSON.stringify({ up_after: stats.up_after, mismatches: stats.healthy_mismatches,
                                                  server_5xx: stats.server_5xx, rss_growth_mb: rssAfter - rssBefore }));
process.exit(ok ? 0 : 1);

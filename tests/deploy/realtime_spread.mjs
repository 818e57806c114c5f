// Deploy.TwoReplicasBehindNginx, realtime part: N realtime conversations at once through nginx, each with
// the official `openai` client's OpenAIRealtimeWS (tests/clients/realtime_client.mjs), each answer equal
// byte for byte to the same turn sent straight to replica 1 (each realtime session samples from seed 0,
// so the same turn gives the same answer on any replica).
//   node realtime_spread.mjs NODE_WORK CLIP_24K_WAV DIRECT_PORT NGINX_PORT N
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const [work, clipPath, directPort, nginxPort, n] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(work), 'package.json'));
const { default: OpenAI } = await import(require.resolve('openai'));
const { OpenAIRealtimeWS } = await import(require.resolve('openai/realtime/ws'));
const { realtimeTurn } = await import('../clients/realtime_client.mjs');

const wav = readFileSync(clipPath);
let pcm = null;
for (let i = 12; i + 8 <= wav.length;) {
  const id = wav.subarray(i, i + 4).toString('latin1'), len = wav.readUInt32LE(i + 4);
  if (id === 'data') pcm = wav.subarray(i + 8, i + 8 + len);
  i += 8 + len + (len & 1);
}
assert.ok(pcm, 'the clip has a data chunk');
const direct = await realtimeTurn(OpenAI, OpenAIRealtimeWS, { port: Number(directPort), pcm });
assert.equal(direct.status, 'completed');
assert.ok(direct.audio.length > 0, 'the direct realtime answer speaks');
const via = await Promise.all(Array.from({ length: Number(n) },
                                         () => realtimeTurn(OpenAI, OpenAIRealtimeWS, { port: Number(nginxPort), pcm })));
via.forEach((r, i) => {
  assert.equal(r.status, 'completed', `conversation ${i + 1}`);
  assert.ok(r.audio.equals(direct.audio), `conversation ${i + 1} through nginx differs from the direct answer`);
  assert.equal(r.transcript, direct.transcript);
});
console.log(`${n} realtime conversations through nginx, each ${direct.audio.length} bytes = the direct answer`);

// One realtime turn through the official `openai` client's `OpenAIRealtimeWS` (the `ws` package under it):
// connect, turn detection off, append PCM16 24 kHz, commit, response.create (and, with `cancel`, a
// response.cancel right after), then every event up to response.done.
//   realtimeTurn(OpenAI, OpenAIRealtimeWS, { port, key, pcm, cancel }) →
//     { status, audio: Buffer, transcript (the deltas joined), transcriptDone, types }
// The client always dials wss:// (its buildRealtimeURL); `lfmvox serve` speaks plain HTTP on loopback
// (TLS belongs to the proxy in front, docs/deploy.md), so the socket is handed a plain TCP connection
// through ws's `createConnection` option.
import net from 'node:net';

export function realtimeTurn(OpenAI, OpenAIRealtimeWS, { port, key = 'none', pcm, cancel = false, timeoutMs = 120000 }) {
  const client = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
  const rt = new OpenAIRealtimeWS({
    model: 'demo', options: { createConnection: (o) => net.connect({ host: o.host, port: o.port }) } }, client);
  const out = { status: null, audio: [], transcript: '', transcriptDone: null, types: [] };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no response.done in ${timeoutMs} ms: ${out.types}`)), timeoutMs);
    const fail = (e) => {
      clearTimeout(timer);
      rt.close();
      reject(e);
    };
    rt.on('error', (e) => fail(new Error(`realtime error: ${e.message}`)));
    rt.on('event', (e) => out.types.push(e.type));
    rt.on('response.output_audio.delta', (e) => out.audio.push(Buffer.from(e.delta, 'base64')));
    rt.on('response.output_audio_transcript.delta', (e) => { out.transcript += e.delta; });
    rt.on('response.output_audio_transcript.done', (e) => { out.transcriptDone = e.transcript; });
    rt.on('response.done', (e) => {
      clearTimeout(timer);
      out.status = e.response.status;
      out.audio = Buffer.concat(out.audio);
      rt.close();
      resolve(out);
    });
    rt.socket.on('open', () => {
      rt.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
      rt.send({ type: 'input_audio_buffer.append', audio: pcm.toString('base64') });
      rt.send({ type: 'input_audio_buffer.commit' });
      rt.send({ type: 'response.create' });
      if (cancel) rt.send({ type: 'response.cancel' });
    });
  });
}

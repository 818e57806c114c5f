// One realtime turn through the official `openai` client's `OpenAIRealtimeWS` (the `ws` package under it):
// connect, turn detection off, append PCM16 24 kHz, commit, response.create (and, with `cancel`, a
// response.cancel right after), then every event up to response.done (and, with `transcribe`, input
// transcription on and every event up to its .completed as well).
//   realtimeTurn(OpenAI, OpenAIRealtimeWS, { port, key, pcm, cancel, transcribe }) →
//     { status, audio: Buffer, transcript (the deltas joined), transcriptDone, types, committedId,
//       input: { transcript (its deltas joined), completed (the event) } }
// The client always dials wss:// (its buildRealtimeURL); `lfmvox serve` speaks plain HTTP on loopback
// (TLS belongs to the proxy in front, docs/deploy.md), so the socket is handed a plain TCP connection
// through ws's `createConnection` option.
import net from 'node:net';

export function realtimeTurn(OpenAI, OpenAIRealtimeWS,
                             { port, key = 'none', pcm, cancel = false, transcribe = false, timeoutMs = 120000 }) {
  const client = new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
  const rt = new OpenAIRealtimeWS({
    model: 'demo', options: { createConnection: (o) => net.connect({ host: o.host, port: o.port }) } }, client);
  const out = { status: null, audio: [], transcript: '', transcriptDone: null, types: [], committedId: null,
                input: { transcript: '', completed: null } };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no response.done in ${timeoutMs} ms: ${out.types}`)), timeoutMs);
    const fail = (e) => {
      clearTimeout(timer);
      rt.close();
      reject(e);
    };
    rt.on('error', (e) => fail(new Error(`realtime error: ${e.message}`)));
    rt.on('event', (e) => out.types.push(e.type));
    rt.on('input_audio_buffer.committed', (e) => { out.committedId = e.item_id; });
    rt.on('response.output_audio.delta', (e) => out.audio.push(Buffer.from(e.delta, 'base64')));
    rt.on('response.output_audio_transcript.delta', (e) => { out.transcript += e.delta; });
    rt.on('response.output_audio_transcript.done', (e) => { out.transcriptDone = e.transcript; });
    const finish = () => {
      if (out.status === null || (transcribe && out.input.completed === null)) return;
      clearTimeout(timer);
      out.audio = Buffer.concat(out.audio);
      rt.close();
      resolve(out);
    };
    rt.on('conversation.item.input_audio_transcription.delta', (e) => { out.input.transcript += e.delta; });
    rt.on('conversation.item.input_audio_transcription.completed', (e) => {
      out.input.completed = e;
      finish();
    });
    rt.on('conversation.item.input_audio_transcription.failed', (e) => fail(new Error(e.error.message)));
    rt.on('response.done', (e) => {
      out.status = e.response.status;
      finish();
    });
    rt.socket.on('open', () => {
      const input = { turn_detection: null, ...(transcribe ? { transcription: { model: 'whisper-1' } } : {}) };
      rt.send({ type: 'session.update', session: { type: 'realtime', audio: { input } } });
      rt.send({ type: 'input_audio_buffer.append', audio: pcm.toString('base64') });
      rt.send({ type: 'input_audio_buffer.commit' });
      rt.send({ type: 'response.create' });
      if (cancel) rt.send({ type: 'response.cancel' });
    });
  });
}

// The lfmvox voice page: microphone → 24 kHz PCM16 → `input_audio_buffer.append` on /v1/realtime; the
// answer's speech played gapless (playback-worklet.js) with its transcript; speaking interrupts it (server
// VAD's `input_audio_buffer.speech_started`), and the history keeps only what was heard
// (`conversation.item.truncate`). Without server VAD, Send commits the turn and asks for the answer.
// `?vad=0` asks for push to talk, `?vad=TYPE` for another turn_detection type. window.lfmvoxStats holds
// counters for tests (tests/browser).
'use strict';

const kRate = 24000;
const kKeep = 4;             // answers and turns whose audio the stats keep (memory stays bounded)
const kTurnChunks = 1500;    // 60 s of 40 ms chunks: the server's default cap on one turn
const $ = (id) => document.getElementById(id);

const stats = {
  mode: '',               // the turn detection ('server_vad') or 'manual', once the session answered
  events: {},             // server event type → count
  errors: [],             // the error events' error objects
  sentSamples: 0,         // 24 kHz samples appended
  committed: [],          // manual mode: the last turns committed, PCM16 as the base64 chunks sent, '|'-joined
  receivedSamples: 0,     // speech samples received
  playedSamples: 0,       // of those, played out
  discardedSamples: 0,    // of those, dropped by an interruption
  bufferedSamples: 0,     // queued for playback now
  speechStarted: 0,
  interruptions: 0,
  interrupts: [],         // {item_id, played, cleared, buffered}: the answer's samples heard, dropped from
                          //   the queue, and left queued after the stop (0)
  truncations: [],        // {item_id, audio_end_ms} sent
  truncated: [],          // {item_id, audio_end_ms} the server confirmed
  responses: [],          // finished: {id, item_id, status, reason, transcript, done_transcript, samples,
                          //   late (received after an interruption), audio (the last few: base64 deltas
                          //   joined by '|')}
  userTranscripts: [],    // input transcriptions, when the server sends them
};
window.lfmvoxStats = stats;

let ws = null, ctx = null, stream = null, capture = null, playback = null;
let turn = [];                // manual mode: the PCM16 chunks appended since the last commit
let current = null;           // the response in flight
let lastItem = null;          // the last answer: {item_id, start, samples, done, truncate}
let pushed = 0;               // samples handed to the playback worklet and not cleared
let pendingSend = false;      // Send pressed: commit once the answer before is stopped and truncated
const clearWaiters = [];      // interrupt()s waiting for the playback worklet's answer to 'clear'

function status(text) { $('status').textContent = text; }

function line(cls, text) {
  const p = document.createElement('p');
  p.className = cls;
  p.textContent = text;
  $('transcript').append(p);
  p.scrollIntoView({ block: 'end' });
  return p;
}

function counters() {
  $('counters').textContent = `sent ${(stats.sentSamples / kRate).toFixed(1)} s · received ` +
      `${(stats.receivedSamples / kRate).toFixed(1)} s · played ${(stats.playedSamples / kRate).toFixed(1)} s · ` +
      `interruptions ${stats.interruptions}`;
}

function send(event) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(event));
}

function toBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function fromBase64(b64) {
  const s = atob(b64);
  const bytes = new Uint8Array(s.length & ~1);
  for (let i = 0; i < bytes.length; ++i) bytes[i] = s.charCodeAt(i);
  return new Int16Array(bytes.buffer);
}

function onCapture(pcm) {  // 40 ms of PCM16 from capture-worklet.js
  if (!stats.mode) return;
  const b64 = toBase64(new Uint8Array(pcm.buffer));
  send({ type: 'input_audio_buffer.append', audio: b64 });
  stats.sentSamples += pcm.length;
  if (stats.mode === 'manual' && turn.length < kTurnChunks) turn.push(b64);
  counters();
}

function onPlayback(m) {  // {played, buffered, cleared} from playback-worklet.js
  stats.playedSamples = m.played;
  stats.bufferedSamples = m.buffered;
  if (m.cleared !== null) {
    stats.discardedSamples += m.cleared;
    const w = clearWaiters.shift();
    if (w) w(m);
  }
  counters();
}

// Once an answer is done and, when it was interrupted, what was heard of it is known: truncate the
// history to that, then send the turn Send was pressed for.
function settle(item) {
  if (!item.done || (item.interrupted && !item.stopped)) return;
  if (item.truncate !== undefined && !item.truncated) {
    item.truncated = true;
    const ms = Math.floor((item.truncate * 1000) / kRate);
    stats.truncations.push({ item_id: item.item_id, audio_end_ms: ms });
    send({ type: 'conversation.item.truncate', item_id: item.item_id, content_index: 0, audio_end_ms: ms });
  }
  if (pendingSend) {
    pendingSend = false;
    commitTurn();
  }
}

// The user speaks over the answer: stop playback at once, and have the history keep only what was heard.
async function interrupt(cancel) {
  const item = current || lastItem;
  if (!item || !playback) return settle({ done: true });
  item.interrupted = true;
  item.stopped = false;
  if (!item.done && cancel) send({ type: 'response.cancel' });
  const m = await new Promise((resolve) => {
    clearWaiters.push(resolve);
    playback.port.postMessage('clear');
  });
  pushed -= m.cleared;  // (pushed counts what the worklet plays: played + buffered)
  item.stopped = true;
  if (m.cleared > 0 || !item.done) {  // else it had been heard to the end
    stats.interruptions++;
    item.truncate = Math.min(item.samples, Math.max(0, m.played - item.start));
    stats.interrupts.push({ item_id: item.item_id, played: item.truncate, cleared: m.cleared, buffered: m.buffered });
  }
  settle(item);
}

function commitTurn() {
  const n = turn.length;
  if (n === 0) return status('Nothing recorded yet.');
  stats.committed.push(turn.join('|'));
  if (stats.committed.length > kKeep) stats.committed[stats.committed.length - kKeep - 1] = '';
  turn = [];
  send({ type: 'input_audio_buffer.commit' });
  send({ type: 'response.create' });
}

function onEvent(e) {
  stats.events[e.type] = (stats.events[e.type] || 0) + 1;
  switch (e.type) {
    case 'session.created': {
      const vad = new URLSearchParams(location.search).get('vad') || 'server_vad';
      send({ type: 'session.update',
             session: { type: 'realtime', audio: { input: { turn_detection: vad === '0' ? null : { type: vad } } } } });
      break;
    }
    case 'session.updated': {
      const td = e.session && e.session.audio && e.session.audio.input && e.session.audio.input.turn_detection;
      setMode(td && td.type ? td.type : 'manual');
      break;
    }
    case 'error':
      stats.errors.push(e.error);
      if (e.error && e.error.code === 'unsupported_turn_detection') {
        setMode('manual');
      } else {
        status(`Server: ${e.error ? e.error.message : 'error'}`);
      }
      break;
    case 'input_audio_buffer.speech_started':
      stats.speechStarted++;
      status('Listening…');
      interrupt(false);  // the server cancels its answer itself (barge-in)
      break;
    case 'input_audio_buffer.speech_stopped':
      status('Thinking…');
      break;
    case 'conversation.item.input_audio_transcription.completed':
      stats.userTranscripts.push(e.transcript);
      line('user', e.transcript);
      break;
    case 'input_audio_buffer.committed':
      if (!stats.events['conversation.item.input_audio_transcription.completed']) line('user', '(speech)');
      break;
    case 'response.created':
      current = { id: e.response.id, item_id: '', transcript: '', audio: [], samples: 0, late: 0, start: pushed,
                  interrupted: false, done: false, line: line('assistant', '') };
      status('Answering…');
      break;
    case 'conversation.item.truncated':
      stats.truncated.push({ item_id: e.item_id, audio_end_ms: e.audio_end_ms });
      break;
    case 'response.output_item.added':
      if (current) current.item_id = e.item.id;
      break;
    case 'response.output_audio_transcript.delta':
      if (current) {
        current.transcript += e.delta;
        current.line.textContent = current.transcript;
      }
      break;
    case 'response.output_audio_transcript.done':
      if (current) current.done_transcript = e.transcript;
      break;
    case 'response.output_audio.delta': {
      if (!current) break;
      const pcm = fromBase64(e.delta);
      current.audio.push(e.delta);
      current.samples += pcm.length;
      stats.receivedSamples += pcm.length;
      if (current.interrupted) {
        current.late += pcm.length;
        stats.discardedSamples += pcm.length;
      } else {
        const f = new Float32Array(pcm.length);
        for (let i = 0; i < pcm.length; ++i) f[i] = pcm[i] / 32768;
        playback.port.postMessage(f, [f.buffer]);
        pushed += pcm.length;
      }
      counters();
      break;
    }
    case 'response.done': {
      if (!current) break;
      const r = current;
      current = null;
      r.done = true;
      r.status = e.response.status;
      if (r.status !== 'completed') r.line.classList.add('cancelled');
      stats.responses.push({ id: r.id, item_id: r.item_id, status: r.status, transcript: r.transcript,
                             done_transcript: r.done_transcript, samples: r.samples, late: r.late,
                             reason: e.response.status_details ? e.response.status_details.reason : null,
                             audio: r.audio.join('|') });
      if (stats.responses.length > kKeep) stats.responses[stats.responses.length - kKeep - 1].audio = '';
      lastItem = r;
      status(stats.mode !== 'manual' ? 'Listening for you…' : 'Speak, then press Send.');
      settle(r);
      break;
    }
  }
}

function setMode(mode) {
  if (stats.mode) return;
  stats.mode = mode;
  $('send').disabled = mode !== 'manual';
  $('mode').textContent = mode !== 'manual' ? 'hands-free: speak to interrupt' :
                                              'push to talk (the server has no voice detection)';
  status(mode !== 'manual' ? 'Listening for you…' : 'Speak, then press Send.');
}

async function start() {
  $('start').disabled = true;
  try {
    try {
      ctx = new AudioContext({ sampleRate: kRate, latencyHint: 'interactive' });
    } catch {
      ctx = new AudioContext({ latencyHint: 'interactive' });  // the worklets resample
    }
    await ctx.audioWorklet.addModule('capture-worklet.js');
    await ctx.audioWorklet.addModule('playback-worklet.js');
    stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true } });
    capture = new AudioWorkletNode(ctx, 'lfmvox-capture', { numberOfOutputs: 1, outputChannelCount: [1] });
    capture.port.onmessage = (e) => onCapture(e.data);
    ctx.createMediaStreamSource(stream).connect(capture);
    capture.connect(ctx.destination);  // (silent: it keeps the node pulled)
    playback = new AudioWorkletNode(ctx, 'lfmvox-playback', { numberOfInputs: 0, outputChannelCount: [1] });
    playback.port.onmessage = (e) => onPlayback(e.data);
    playback.connect(ctx.destination);
    await ctx.resume();
  } catch (err) {
    status(`Audio: ${err.message}`);
    $('start').disabled = false;
    return;
  }
  // A browser cannot send an Authorization header: the key goes as a subprotocol, as OpenAI's API takes it.
  const key = $('key').value.trim();
  try {
    ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/realtime`,
                       key ? ['realtime', `openai-insecure-api-key.${key}`] : []);
  } catch (err) {
    status(`The API key cannot be sent: ${err.message}`);
    stop();
    $('start').disabled = false;
    return;
  }
  const sock = ws;
  let created = false;
  sock.onmessage = (m) => {
    const e = JSON.parse(m.data);
    if (e.type === 'session.created') created = true;
    onEvent(e);
  };
  sock.onclose = () => {
    if (sock !== ws) return;  // (an earlier connection, already stopped)
    status(created ? 'Disconnected.' : 'The server refused the connection: is an API key needed, or a wrong one given?');
    stop();
    $('start').disabled = false;
  };
  sock.onerror = () => status('The connection failed.');
  $('stop').disabled = false;
  status('Connecting…');
}

function stop() {
  if (ws) ws.close();
  if (stream) stream.getTracks().forEach((t) => t.stop());
  if (ctx) ctx.close();
  ws = ctx = stream = capture = playback = null;
  stats.mode = '';
  turn = [];
  current = lastItem = null;
  pushed = 0;  // (a new playback worklet counts from 0)
  pendingSend = false;
  clearWaiters.length = 0;
  $('send').disabled = $('stop').disabled = true;
}

$('start').addEventListener('click', start);
$('stop').addEventListener('click', () => {
  stop();
  status('Stopped.');
  $('start').disabled = false;
});
$('send').addEventListener('click', () => {
  // Speaking during the answer talks over it: stop it (cancelled if still coming), then send the turn.
  pendingSend = true;
  interrupt(true);
});

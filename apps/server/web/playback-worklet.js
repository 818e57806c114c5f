// Gapless playback of the 24 kHz speech the server streams: a FIFO of sample chunks read out at the
// AudioContext's rate (linear resampling when that is not 24 kHz). Messages in: a Float32Array to queue,
// or 'clear' (barge-in: drop what is queued). Out: {played, buffered, cleared} in 24 kHz samples, after
// a clear (cleared: the samples it dropped) and, with cleared null, when a chunk is queued and as the
// queue plays, every ~50 ms.
const kRate = 24000;

class LfmvoxPlayback extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = kRate / sampleRate;  // source samples per output sample
    this.queue = [];
    this.head = 0;  // the next sample's index in queue[0]
    this.frac = 0;
    this.buffered = 0;
    this.played = 0;
    this.reported = 0;  // nothing is reported before something has played or been queued
    this.sinceReport = 0;
    this.port.onmessage = (e) => {
      if (e.data === 'clear') {
        const cleared = this.buffered;
        this.queue = [];
        this.head = 0;
        this.frac = 0;
        this.buffered = 0;
        this.report(cleared);
      } else if (e.data instanceof Float32Array && e.data.length > 0) {
        this.queue.push(e.data);
        this.buffered += e.data.length;
        this.report(null);
      }
    };
  }

  report(cleared) {
    this.port.postMessage({ played: this.played, buffered: this.buffered, cleared });
    this.reported = this.played;
    this.sinceReport = 0;
  }

  peek(k) {
    for (let q = 0, i = this.head + k; q < this.queue.length; i -= this.queue[q].length, ++q) {
      if (i < this.queue[q].length) return this.queue[q][i];
    }
    return null;
  }

  drop() {
    if (++this.head === this.queue[0].length) {
      this.queue.shift();
      this.head = 0;
    }
    --this.buffered;
    ++this.played;
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    for (let k = 0; k < out.length; ++k) {
      if (this.buffered === 0) {
        out[k] = 0;
        continue;
      }
      const a = this.peek(0), b = this.peek(1);
      out[k] = b === null ? a : a + this.frac * (b - a);
      for (this.frac += this.step; this.frac >= 1 - 1e-9 && this.buffered > 0; this.frac -= 1) this.drop();
      if (this.buffered === 0) this.frac = 0;
    }
    this.sinceReport += out.length;
    if (this.played !== this.reported && (this.buffered === 0 || this.sinceReport >= sampleRate / 20)) this.report(null);
    return true;
  }
}

registerProcessor('lfmvox-playback', LfmvoxPlayback);

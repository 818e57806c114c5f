// The microphone's samples, resampled (linear) from the AudioContext's rate to 24 kHz and converted to
// PCM16, posted to the page in 40 ms chunks. At a 24 kHz context (the page asks for one) this is a copy.
const kRate = 24000;
const kChunk = 960;

class LfmvoxCapture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / kRate;  // input samples per output sample
    this.t = 0;                      // the next output sample's position in the current block
    this.prev = 0;                   // the previous block's last sample (position -1)
    this.out = new Int16Array(kChunk);
    this.n = 0;
  }

  emit(v) {
    this.out[this.n++] = Math.round(Math.max(-32768, Math.min(32767, v * 32768)));
    if (this.n === kChunk) {
      this.port.postMessage(this.out, [this.out.buffer]);
      this.out = new Int16Array(kChunk);
      this.n = 0;
    }
  }

  process(inputs) {
    const x = inputs[0] && inputs[0][0];
    if (!x || x.length === 0) return true;
    const n = x.length;
    for (; this.t <= n - 1; this.t += this.step) {
      const i = Math.floor(this.t), f = this.t - i;
      const a = i < 0 ? this.prev : x[i];
      this.emit(f > 0 ? a + f * (x[i + 1] - a) : a);
    }
    this.t -= n;
    this.prev = x[n - 1];
    return true;
  }
}

registerProcessor('lfmvox-capture', LfmvoxCapture);

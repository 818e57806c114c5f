// Server VAD for /v1/realtime: the voice activity detector of the WebRTC audio-processing library
// (Debian's libwebrtc-audio-processing-dev 0.3, `AudioProcessing::voice_detection()`), wrapped into the
// OpenAI `turn_detection: {type: "server_vad"}` turn logic.
//
// The wire's 24 kHz PCM is resampled to 16 kHz (dsp::Resampler, torchaudio's band-limited sinc, the
// same as the model's front end) in 10 ms frames, each one ProcessStream call and one voice decision.
// Resampling is streamed: every frame is cut from a window that reaches kLookahead = 30 input samples
// past both of its ends, more than the kernel reaches (10 input samples before an output, 12 after:
// W = ceil(6·3/1.98) = 10 for 24 -> 16 kHz, resample.h), so the frames are exactly the whole signal
// resampled at once (the window starts at a multiple of 3 input samples, so the phases line up);
// the cost is kLookahead samples (1.25 ms) of latency.
//
// Turns (sample indices count 24 kHz input samples since the detector was made):
// - speech starts at the first voiced frame f: audio_start = max(0, 240·f − prefix_padding);
// - it stops once silence_frames = max(1, ceil(silence_duration_ms / 10)) unvoiced frames follow one
//   another; the last of them, g, gives audio_end = 240·(g + 1) (the silence is part of the turn).
//
// threshold → the library's likelihood (how readily a frame is called voice; WebRTC's VAD modes
// 0..3, 3 the most aggressive at calling frames silence), in four equal bins, a higher threshold
// needing more evidence: [0, 0.25) kHighLikelihood (mode 0), [0.25, 0.5) kModerateLikelihood (1),
// [0.5, 0.75) kLowLikelihood (2, OpenAI's default 0.5), [0.75, 1] kVeryLowLikelihood (3).
//
// Not thread-safe: one per realtime session, used on its strand. Nothing throws out of it.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lfmvox/lfmvox.h"

namespace lfmvox::server {

struct VadOptions {
  double threshold = 0.5;         // 0..1
  int prefix_padding_ms = 300;    // audio kept before the speech start, 0..10000
  int silence_duration_ms = 500;  // silence that ends a turn, 0..10000
};

// A VAD decision that changed the turn state.
struct VadTransition {
  enum Kind { kSpeechStarted, kSpeechStopped } kind;
  size_t sample;  // audio_start (with the padding) or audio_end, 24 kHz samples since Create
};

class ServerVad {
 public:
  static constexpr int kInputRate = 24000;
  static constexpr int kVadRate = 16000;
  static constexpr size_t kFrame = kInputRate / 100;  // 10 ms of input
  static constexpr size_t kLookahead = 30;            // input samples; a multiple of 3, > the kernel reach

  // InvalidArgument for a value out of range (its option's name in *bad_option when given); Internal
  // when the library fails.
  static Result<std::unique_ptr<ServerVad>> Create(const VadOptions& options,
                                                   std::string* bad_option = nullptr);
  ~ServerVad();

  // Feeds 24 kHz mono samples in [-1, 1]; appends the transitions they complete, in order.
  Status Push(std::span<const float> pcm, std::vector<VadTransition>* out);

  bool speaking() const { return speaking_; }
  size_t frames() const { return frames_; }  // 10 ms frames decided so far
  // The library's likelihood level (0 = kVeryLowLikelihood … 3 = kHighLikelihood) for a threshold.
  static int LikelihoodFor(double threshold);

 private:
  struct Impl;
  explicit ServerVad(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  VadOptions options_;
  size_t silence_frames_ = 1;
  bool speaking_ = false;
  size_t silence_run_ = 0;
  size_t frames_ = 0;
};

}  // namespace lfmvox::server

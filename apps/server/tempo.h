// `speed` of POST /v1/audio/speech: the speech played faster or slower at the same pitch, by time-scale
// modification (WSOLA) from the SoundTouch library (Debian's libsoundtouch). Streams: PCM in as it is
// decoded, PCM out as SoundTouch releases it, the tail at Finish. speed 1.0 is never routed through it.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "lfmvox/status.h"

namespace lfmvox::server {

class TempoStretcher {
 public:
  // speed in [0.25, 4.0] (OpenAI's range); mono at sample_rate.
  static Result<std::unique_ptr<TempoStretcher>> Create(int sample_rate, double speed);
  ~TempoStretcher();

  // Appends to *out what the stretcher releases for `in` (it holds back up to ~100 ms).
  Status Push(std::span<const float> in, std::vector<float>* out);
  // Appends the rest.
  Status Finish(std::vector<float>* out);

  struct Impl;

 private:
  explicit TempoStretcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lfmvox::server

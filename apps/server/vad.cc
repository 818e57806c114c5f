#include "vad.h"

#include <webrtc/modules/audio_processing/include/audio_processing.h>

#include <algorithm>
#include <new>
#include <optional>
#include <string>

#include "dsp/resample.h"

namespace lfmvox::server {

struct ServerVad::Impl {
  std::unique_ptr<webrtc::AudioProcessing> apm;
  std::optional<dsp::Resampler> resampler;
  std::vector<float> window;  // input from the next frame's start − kLookahead on
  size_t head = 0;            // window[head] is that sample (compacted at the end of each Push)
  std::vector<float> out16, frame16;
};

namespace {

constexpr size_t kWindow = ServerVad::kLookahead + ServerVad::kFrame + ServerVad::kLookahead;
static_assert(ServerVad::kLookahead % 3 == 0 && ServerVad::kFrame % 3 == 0,
              "24 kHz -> 16 kHz has 3 input phases: windows must start on a multiple of 3");

Status CheckMs(int v, const char* name) {
  if (v < 0 || v > 10000) {
    return InvalidArgument(std::string(name) + " must be an integer from 0 to 10000 (milliseconds), not " +
                           std::to_string(v));
  }
  return Status::Ok();
}

}  // namespace

int ServerVad::LikelihoodFor(double threshold) {
  if (threshold < 0.25) return webrtc::VoiceDetection::kHighLikelihood;
  if (threshold < 0.5) return webrtc::VoiceDetection::kModerateLikelihood;
  if (threshold < 0.75) return webrtc::VoiceDetection::kLowLikelihood;
  return webrtc::VoiceDetection::kVeryLowLikelihood;
}

ServerVad::ServerVad(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServerVad::~ServerVad() = default;

Result<std::unique_ptr<ServerVad>> ServerVad::Create(const VadOptions& options, std::string* bad_option) {
  const char* bad = nullptr;
  Status s;
  if (!(options.threshold >= 0.0 && options.threshold <= 1.0)) {
    bad = "threshold";
    s = InvalidArgument("threshold must be a number from 0 to 1, not " + std::to_string(options.threshold));
  } else if (s = CheckMs(options.prefix_padding_ms, "prefix_padding_ms"); !s.ok()) {
    bad = "prefix_padding_ms";
  } else if (s = CheckMs(options.silence_duration_ms, "silence_duration_ms"); !s.ok()) {
    bad = "silence_duration_ms";
  }
  if (bad) {
    if (bad_option) *bad_option = bad;
    return s;
  }
  try {
    auto impl = std::make_unique<Impl>();
    impl->apm.reset(webrtc::AudioProcessing::Create());
    if (!impl->apm) return Internal("the WebRTC audio processor could not be created");
    webrtc::VoiceDetection* vd = impl->apm->voice_detection();
    const auto likelihood = static_cast<webrtc::VoiceDetection::Likelihood>(LikelihoodFor(options.threshold));
    if (vd->Enable(true) != webrtc::AudioProcessing::kNoError ||
        vd->set_likelihood(likelihood) != webrtc::AudioProcessing::kNoError ||
        vd->set_frame_size_ms(10) != webrtc::AudioProcessing::kNoError) {
      return Internal("the WebRTC voice detector refused its settings");
    }
    auto r = dsp::Resampler::Create(kInputRate, kVadRate);
    if (!r.ok()) return r.status();
    impl->resampler.emplace(std::move(r).value());
    impl->window.assign(kLookahead, 0.0f);  // the signal is zero before its start, as in one-shot resampling
    impl->out16.resize(impl->resampler->OutputLength(kWindow));
    impl->frame16.resize(kVadRate / 100);
    std::unique_ptr<ServerVad> vad(new ServerVad(std::move(impl)));
    vad->options_ = options;
    vad->silence_frames_ = std::max<size_t>(1, static_cast<size_t>((options.silence_duration_ms + 9) / 10));
    return vad;
  } catch (const std::bad_alloc&) {
    return Internal("out of memory creating the voice detector");
  }
}

Status ServerVad::Push(std::span<const float> pcm, std::vector<VadTransition>* out) {
  Impl& m = *impl_;
  try {
    m.window.insert(m.window.end(), pcm.begin(), pcm.end());
    const webrtc::StreamConfig config(kVadRate, 1, false);
    const size_t lead = kLookahead * kVadRate / kInputRate;  // 16 kHz samples before the frame
    while (m.window.size() - m.head >= kWindow) {
      if (Status s = m.resampler->Process(std::span<const float>(m.window).subspan(m.head, kWindow), m.out16);
          !s.ok()) {
        return s;
      }
      std::copy_n(m.out16.begin() + static_cast<std::ptrdiff_t>(lead), m.frame16.size(), m.frame16.begin());
      const float* src = m.frame16.data();
      float* dst = m.frame16.data();
      if (int e = m.apm->ProcessStream(&src, config, config, &dst); e != webrtc::AudioProcessing::kNoError) {
        return Internal("the WebRTC voice detector failed on a frame (error " + std::to_string(e) + ")");
      }
      const bool voice = m.apm->voice_detection()->stream_has_voice();
      const size_t f = frames_++;
      m.head += kFrame;
      if (!speaking_) {
        if (voice) {
          speaking_ = true;
          silence_run_ = 0;
          const size_t start = f * kFrame,
                       pad = static_cast<size_t>(options_.prefix_padding_ms) * (kInputRate / 1000);
          out->push_back({VadTransition::kSpeechStarted, start > pad ? start - pad : 0});
        }
      } else if (voice) {
        silence_run_ = 0;
      } else if (++silence_run_ >= silence_frames_) {
        speaking_ = false;
        out->push_back({VadTransition::kSpeechStopped, (f + 1) * kFrame});
      }
    }
    m.window.erase(m.window.begin(), m.window.begin() + static_cast<std::ptrdiff_t>(m.head));
    m.head = 0;
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Internal("out of memory in the voice detector");
  }
}

}  // namespace lfmvox::server

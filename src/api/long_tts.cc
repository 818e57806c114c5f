// Long-form TTS (lfmvox.h SpeakText): sentences spoken one by one on a fresh conversation each, joined
// into one PCM stream with a short fade and gap at each join.
#include <algorithm>
#include <string>
#include <vector>

#include "base/guard.h"
#include "base/status.h"
#include "lfmvox/lfmvox.h"
#include "text/sentence_split.h"

namespace lfmvox {
namespace {

// Joins segments' PCM into the caller's on_pcm. The last `fade` samples of a segment are held back until
// the segment ends, when they fade out (if another segment follows) and go out with the gap; the first
// `fade` samples of a later segment fade in.
class Joiner {
 public:
  Joiner(const OutputCallbacks& out, size_t fade, size_t gap) : out_(out), fade_(fade), gap_(gap) {
    held_.reserve(fade + 4096);
  }

  void StartSegment(bool fade_in) {
    fade_in_ = fade_in;
    pos_ = 0;
  }

  Status Push(std::span<const float> pcm) {
    for (float x : pcm) {
      if (fade_in_ && pos_ < fade_) x *= static_cast<float>(pos_) / static_cast<float>(fade_);
      ++pos_;
      held_.push_back(x);
    }
    if (held_.size() <= fade_) return Status::Ok();
    const size_t n = held_.size() - fade_;
    LFM_RETURN_IF_ERROR(Emit({held_.data(), n}));
    held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(n));
    return Status::Ok();
  }

  // Ends a segment: its held tail (faded out when another follows), then the gap.
  Status EndSegment(bool another_follows) {
    if (another_follows) {
      const size_t m = held_.size();  // ≤ fade_: the segment's last samples
      for (size_t k = 0; k < m; ++k) {
        held_[k] *= static_cast<float>(m - 1 - k) / static_cast<float>(fade_);
      }
    }
    LFM_RETURN_IF_ERROR(Emit(held_));
    held_.clear();
    if (!another_follows) return Status::Ok();
    const std::vector<float> zeros(std::min<size_t>(gap_, 1920), 0.0f);
    for (size_t left = gap_; left > 0;) {
      const size_t n = std::min(left, zeros.size());
      LFM_RETURN_IF_ERROR(Emit({zeros.data(), n}));
      left -= n;
    }
    return Status::Ok();
  }

  size_t samples() const { return samples_; }

 private:
  Status Emit(std::span<const float> pcm) {
    samples_ += pcm.size();
    return pcm.empty() || !out_.on_pcm ? Status::Ok() : out_.on_pcm(pcm);
  }

  const OutputCallbacks& out_;
  const size_t fade_, gap_;
  std::vector<float> held_;
  bool fade_in_ = false;
  size_t pos_ = 0;  // samples of the segment so far
  size_t samples_ = 0;
};

}  // namespace

Result<std::vector<std::string>> SplitSentences(std::string_view text, size_t max_segment_bytes) {
  return Guard("SplitSentences", [&]() { return text::SplitSentences(text, max_segment_bytes); });
}

Result<SpeakSummary> SpeakText(Conversation& conversation, std::string_view voice, std::string_view text,
                               const GenerateOptions& options, const OutputCallbacks& out,
                               const SpeakOptions& speak) {
  return Guard("SpeakText", [&]() -> Result<SpeakSummary> {
    if (!(speak.fade_seconds >= 0 && speak.fade_seconds <= 1) ||
        !(speak.gap_seconds >= 0 && speak.gap_seconds <= 10)) {
      return InvalidArgument("fade_seconds must be in [0, 1] and gap_seconds in [0, 10]");
    }
    LFM_ASSIGN_OR_RETURN(const std::vector<std::string> segments,
                         text::SplitSentences(text, speak.max_segment_bytes));
    if (segments.empty())
      return InvalidArgument("the text has nothing to speak (only spaces and punctuation)");
    const double rate = conversation.model().sample_rate();
    Joiner join(out, static_cast<size_t>(speak.fade_seconds * rate),
                static_cast<size_t>(speak.gap_seconds * rate));
    OutputCallbacks cb = out;
    cb.on_pcm = [&join](std::span<const float> pcm) { return join.Push(pcm); };
    SpeakSummary summary;
    for (size_t i = 0; i < segments.size(); ++i) {
      conversation.Reset();  // a fresh context and RNG per sentence: the same voice prompt, the same seed
      LFM_RETURN_IF_ERROR(
          conversation.StartSpeech(voice, segments[i]).WithContext(StrFormat("sentence %zu", i + 1)));
      join.StartSegment(i > 0);
      LFM_ASSIGN_OR_RETURN(const GenerateSummary g, conversation.Generate(options, cb));
      ++summary.segments;
      summary.unfinished_segments += !g.ended;
      summary.timings += g.timings;
      if (speak.on_progress) speak.on_progress(i + 1, segments.size());
      const bool last = i + 1 == segments.size() || g.cancelled;
      LFM_RETURN_IF_ERROR(join.EndSegment(!last));
      if (g.cancelled) {
        summary.cancelled = true;
        break;
      }
    }
    summary.pcm_samples = join.samples();
    return summary;
  });
}

}  // namespace lfmvox

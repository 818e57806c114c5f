// Long-form ASR (lfmvox/transcribe.h): a streamed decode into one window buffer, cuts at the quietest
// 20 ms block near the end of each full window, one ASR conversation turn per window.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/guard.h"
#include "base/status.h"
#include "io/audio_file.h"
#include "lfmvox/transcribe.h"

namespace lfmvox {
namespace {

constexpr int64_t kBlockFrames = 4096;

// The first frame of the quietest 20 ms block in [lo, hi) of `buf` (interleaved, `ch` channels): the sum
// of squares of the channel mean. Ties go to the earliest block.
size_t QuietestCut(const std::vector<float>& buf, size_t ch, size_t lo, size_t hi, int rate) {
  const size_t block = std::max<size_t>(1, static_cast<size_t>(rate) / 50);
  size_t best = hi;
  double best_energy = std::numeric_limits<double>::infinity();
  for (size_t b = lo; b + block <= hi; b += block) {
    double e = 0;
    for (size_t t = b; t < b + block; ++t) {
      double m = 0;
      for (size_t c = 0; c < ch; ++c) m += buf[t * ch + c];
      m /= static_cast<double>(ch);
      e += m * m;
    }
    if (e < best_energy) {
      best_energy = e;
      best = b;
    }
  }
  return best > lo ? best : hi;  // a cut at lo would make an empty-ish window; fall back to the full one
}

}  // namespace

Result<TranscribeSummary> Transcribe(std::shared_ptr<const AudioModel> model, const std::string& path,
                                     const TranscribeOptions& options,
                                     const std::function<Status(const TranscriptSegment&)>& on_segment) {
  return Guard("Transcribe", [&]() -> Result<TranscribeSummary> {
    if (!model) return InvalidArgument("Transcribe: no model");
    const TranscribeOptions& o = options;
    if (!(o.window_seconds >= 1 && o.window_seconds <= 3600)) {
      return InvalidArgument("window_seconds must be in [1, 3600]");
    }
    if (!(o.search_seconds >= 0 && o.search_seconds < o.window_seconds)) {
      return InvalidArgument("search_seconds must be in [0, window_seconds)");
    }
    if (!(o.max_seconds > 0)) return InvalidArgument("max_seconds must be positive");
    if (o.max_new_tokens < 0) return InvalidArgument("max_new_tokens must be >= 0");

    LFM_ASSIGN_OR_RETURN(std::unique_ptr<AudioDecoder> decoder, OpenAudioFile(path));
    const int rate = decoder->sample_rate;
    const size_t ch = static_cast<size_t>(decoder->channels);
    const double max_frames = o.max_seconds * rate;
    auto too_long = [&](double frames) {
      return OutOfRange(
          StrFormat("%s is %s%.1f s long; the limit is %g s (raise max_seconds / --max-seconds)",
                    path.c_str(), decoder->declared_frames < 0 ? "over " : "", frames / rate, o.max_seconds));
    };
    if (static_cast<double>(decoder->declared_frames) > max_frames) {
      return too_long(static_cast<double>(decoder->declared_frames));
    }
    const double total_seconds =
        decoder->declared_frames >= 0 ? static_cast<double>(decoder->declared_frames) / rate : -1;

    GenerateOptions gen = GenerateOptions::ForAsr(*model);
    if (o.max_new_tokens > 0) gen.max_new_tokens = o.max_new_tokens;
    gen.word_timestamps = o.word_timestamps;
    LFM_ASSIGN_OR_RETURN(
        std::unique_ptr<Conversation> conv,
        Conversation::Create(model, {.threads = o.threads, .max_clip_seconds = o.window_seconds}));
    const size_t window = static_cast<size_t>(o.window_seconds * rate);
    const size_t search = static_cast<size_t>(o.search_seconds * rate);
    std::vector<float> buf(window * ch);  // the only decoded samples held
    TranscribeSummary summary;
    summary.peak_buffered_samples = buf.size();
    size_t filled = 0;  // frames in buf
    int64_t start = 0;  // the file frame buf[0] is
    bool eof = false;
    while (!eof || filled > 0) {
      while (!eof && filled < window) {
        const int64_t want = std::min<int64_t>(kBlockFrames, static_cast<int64_t>(window - filled));
        Result<int64_t> got = decoder->Read(buf.data() + filled * ch, want);
        if (!got.ok()) return got.status().WithContext(path);
        if (*got <= 0) {
          eof = true;
          break;
        }
        filled += static_cast<size_t>(*got);
        if (static_cast<double>(start + static_cast<int64_t>(filled)) > max_frames) {
          return too_long(static_cast<double>(start + static_cast<int64_t>(filled)));
        }
      }
      if (filled == 0) break;
      const size_t cut = eof ? filled : QuietestCut(buf, ch, window - search, window, rate);

      conv->Reset();
      TranscriptSegment seg;
      seg.start = static_cast<double>(start) / rate;
      seg.end = static_cast<double>(start + static_cast<int64_t>(cut)) / rate;
      const bool official = o.prompt_before_speech.empty() && o.prompt_after_speech.empty();
      LFM_RETURN_IF_ERROR(official ? conv->StartAsr() : conv->AddTokens(o.prompt_before_speech));
      LFM_RETURN_IF_ERROR(conv->AddAudio({buf.data(), cut * ch}, rate, decoder->channels)
                              .WithContext(StrFormat("%s at %.2f s", path.c_str(), seg.start)));
      if (official) {
        LFM_RETURN_IF_ERROR(conv->EndTurn());
        LFM_RETURN_IF_ERROR(conv->StartTurn("assistant"));
      } else {
        LFM_RETURN_IF_ERROR(conv->AddTokens(o.prompt_after_speech));
      }
      OutputCallbacks cb;
      cb.on_text = [&](int32_t id, std::string_view piece) {
        seg.ids.push_back(id);
        if (!model->IsSpecialToken(id)) seg.text.append(piece);
        return Status::Ok();
      };
      LFM_ASSIGN_OR_RETURN(GenerateSummary g, conv->Generate(gen, cb));
      summary.timings += g.timings;
      for (WordTiming& w : g.words) {  // clip times → file times, inside the window
        w.start = std::min(seg.start + w.start, seg.end);
        w.end = std::min(seg.start + w.end, seg.end);
        seg.words.push_back(std::move(w));
      }
      if (on_segment) LFM_RETURN_IF_ERROR(on_segment(seg));
      if (o.on_progress) o.on_progress(seg.end, total_seconds);
      summary.segments.push_back(std::move(seg));

      std::copy(buf.begin() + static_cast<ptrdiff_t>(cut * ch),
                buf.begin() + static_cast<ptrdiff_t>(filled * ch), buf.begin());
      filled -= cut;
      start += static_cast<int64_t>(cut);
    }
    if (start == 0) return InvalidArgument(path + ": the file holds no audio samples");
    summary.seconds = static_cast<double>(start) / rate;
    return summary;
  });
}

namespace {

// HH:MM:SS<sep>mmm, rounded to the millisecond.
std::string Timestamp(double seconds, char sep) {
  const long long ms = std::llround(std::max(0.0, seconds) * 1000);
  return StrFormat("%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep,
                   ms % 1000);
}

}  // namespace

std::string FormatTranscript(std::span<const TranscriptSegment> segments, TranscriptFormat format,
                             bool with_words) {
  std::string out;
  switch (format) {
    case TranscriptFormat::kText:
      for (const TranscriptSegment& s : segments) out += s.text + "\n";
      break;
    case TranscriptFormat::kJson: {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const TranscriptSegment& s : segments) {
        nlohmann::ordered_json seg = {{"start", s.start}, {"end", s.end}, {"text", s.text}};
        if (with_words || !s.words.empty()) {
          nlohmann::ordered_json words = nlohmann::ordered_json::array();
          for (const WordTiming& w : s.words)
            words.push_back({{"word", w.text}, {"start", w.start}, {"end", w.end}});
          seg["words"] = std::move(words);
        }
        list.push_back(std::move(seg));
      }
      out = nlohmann::ordered_json{{"segments", list}}.dump(
                -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
            "\n";
      break;
    }
    case TranscriptFormat::kSrt:
    case TranscriptFormat::kVtt: {
      const bool srt = format == TranscriptFormat::kSrt;
      if (!srt) out = "WEBVTT\n\n";
      for (size_t i = 0; i < segments.size(); ++i) {
        const TranscriptSegment& s = segments[i];
        if (srt) out += std::to_string(i + 1) + "\n";
        out += Timestamp(s.start, srt ? ',' : '.') + " --> " + Timestamp(s.end, srt ? ',' : '.') + "\n";
        out += s.text + "\n\n";
      }
      break;
    }
  }
  return out;
}

}  // namespace lfmvox

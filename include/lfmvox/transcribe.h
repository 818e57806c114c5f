// Long-form speech recognition: audio of any length (up to a cap the caller sets), transcribed window by
// window with memory that does not grow with the length of the input.
//
// How it works. The file is decoded as a stream (libsndfile or FFmpeg, blocks of 4096 frames) into one buffer
// of `window_seconds`; nothing longer is ever held as floats. When the buffer is full, the window is cut at
// the quietest 20 ms block (least energy of the channel mean) within its last `search_seconds`, so seams
// fall in pauses between words rather than inside them; the samples after the cut start the next window.
// Windows do not overlap, so no word is transcribed twice and no merge is needed; a word cut at a seam
// (speech without any pause for search_seconds) may be misread on both sides. Each window is resampled to
// the encoder's rate (the same path as Conversation::AddAudio) and transcribed on its own with the official
// ASR prompt: the model's ASR prompt has no slot for earlier text, so the previous window's text is not
// given as context. A file that fits in one window gives exactly what StartAsr + AddAudioFile + Generate
// (GenerateOptions::ForAsr) give.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lfmvox/lfmvox.h"
#include "lfmvox/status.h"
#include "lfmvox/visibility.h"

LFMVOX_API_BEGIN
namespace lfmvox {

struct TranscribeOptions {
  double max_seconds = 3600;   // a longer input is an error (OutOfRange); raise it for longer files
  double window_seconds = 30;  // the longest window one encoder pass takes
  double search_seconds = 5;   // where the cut is looked for: the last search_seconds of a full window
  int max_new_tokens = 0;      // per window; 0: GenerateOptions::ForAsr's
  int threads = 1;
  // Token ids around each window's speech in place of the official ASR prompt (StartAsr before it,
  // EndTurn + StartTurn("assistant") after it), for checkpoints without that prompt's tokens. Both empty:
  // the official prompt.
  std::vector<int32_t> prompt_before_speech{}, prompt_after_speech{};
  // Called after each window with the seconds transcribed so far and the file's length as its header
  // declares it (-1 when unknown), for a progress line; the library prints nothing.
  std::function<void(double done_seconds, double total_seconds)> on_progress{};
  // Each segment's words with their times (GenerateOptions::word_timestamps: approximate, see there).
  bool word_timestamps = false;
};

struct TranscriptSegment {
  double start = 0;  // seconds from the start of the file
  double end = 0;
  std::string text;            // the window's transcript, control tokens left out
  std::vector<int32_t> ids{};  // every text token generated for the window, control tokens included
  std::vector<WordTiming>
      words{};  // with TranscribeOptions::word_timestamps: in seconds from the file's start
};

struct TranscribeSummary {
  std::vector<TranscriptSegment> segments;  // in order, contiguous: each starts where the one before ended
  double seconds = 0;                       // the length of the input
  size_t peak_buffered_samples = 0;         // the most decoded samples held at once (window x channels)
  StageTimings timings;                     // summed over the windows
};

// Transcribes the audio file at `path` (any format AddAudioFile reads). on_segment, when set, is called
// with each segment as soon as its window is transcribed; a non-OK return stops and is returned.
Result<TranscribeSummary> Transcribe(std::shared_ptr<const AudioModel> model, const std::string& path,
                                     const TranscribeOptions& options = {},
                                     const std::function<Status(const TranscriptSegment&)>& on_segment = {});

enum class TranscriptFormat { kText, kJson, kSrt, kVtt };

// "text": each segment's text on its own line (one window: what `lfmvox asr` always printed);
// "json": {"segments": [{"start": s, "end": s, "text": "...", "words": [{"word", "start", "end"}, ...]},
// ...]}
//   ("words" on every segment when with_words, empty where a segment has none; otherwise only where a
//   segment has them);
// "srt": numbered cues "HH:MM:SS,mmm --> HH:MM:SS,mmm"; "vtt": "WEBVTT" and "HH:MM:SS.mmm" cues.
// Times are rounded to the nearest millisecond.
std::string FormatTranscript(std::span<const TranscriptSegment> segments, TranscriptFormat format,
                             bool with_words = false);

}  // namespace lfmvox
LFMVOX_API_END

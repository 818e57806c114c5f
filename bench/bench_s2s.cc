// Speech in and speech-to-speech at the real LFM2.5-Audio size (random weights
// in the real layout), through the public API, at 1 and 2 threads:
//   - front end + encoder real-time factor on a 10 s clip;
//   - prefill tokens/s for a spoken question (tests/data/inputs/question.wav, 4.9 s);
//   - time to the first audio sample of an interleaved answer;
//   - real-time factor of the whole interleaved answer (audio produced ÷ wall time).
//   bench_s2s [--model DIR] [--max-new N]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "lfmvox/lfmvox.h"
#include "tools/checkpoint_gen.h"

using namespace lfmvox;
using bench::Now;

int main(int argc, char** argv) {
  std::string dir;
  int max_new = 48;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model")
      dir = argv[i + 1];
    else if (k == "--max-new")
      max_new = std::max(8, std::atoi(argv[i + 1]));
  }
  const std::string src = LFMVOX_SOURCE_DIR;
  if (dir.empty()) {
    dir = "/tmp/lfmvox_bench_real";
    std::printf("using a random real-size LFM2.5-Audio checkpoint in %s (written once)\n", dir.c_str());
    Status s = tools::EnsureRealSizeModel(dir, src + "/tests/data/tokenizer/tokenizer.json");
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  auto model = AudioModel::Load(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  // A 10 s test signal at 16 kHz: a chirp with an amplitude envelope.
  std::vector<float> clip(160000);
  for (size_t i = 0; i < clip.size(); ++i) {
    const double t = static_cast<double>(i) / 16000;
    clip[i] =
        static_cast<float>(0.3 * std::sin(2 * M_PI * (200 + 150 * t) * t) * (0.6 + 0.4 * std::sin(3 * t)));
  }
  for (int threads : {1, 2}) {
    ConversationOptions co;
    co.threads = threads;
    co.context = 2048;
    co.seed = 1;
    auto conv = Conversation::Create(*model, co);
    if (!conv.ok()) {
      std::fprintf(stderr, "%s\n", conv.status().ToString().c_str());
      return 1;
    }
    Conversation& c = **conv;
    // Encoder real-time factor (front end + encoder + adapter); the positions are discarded.
    double t0 = Now();
    if (Status s = c.AddAudio(clip, 16000); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    const double encode = Now() - t0;
    c.Reset();
    // The speech-to-speech prompt around the spoken question. Generate runs the prompt's
    // prefill first, so the time to the first item includes it.
    (void)c.StartChat();  // the model's default system prompt
    (void)c.StartTurn("user");
    t0 = Now();
    (void)c.AddAudioFile(src + "/tests/data/inputs/question.wav");
    const double question_encode = Now() - t0;
    (void)c.EndTurn();
    (void)c.StartTurn("assistant");
    GenerateOptions o = GenerateOptions::ForSpeechToSpeech(**model);
    o.max_new_tokens = max_new;
    double first_item = 0, first_audio = 0;
    size_t samples = 0;
    int items = 0;
    OutputCallbacks cb;
    cb.on_text = [&](int32_t, std::string_view) {
      if (items++ == 0) first_item = Now();
      return Status::Ok();
    };
    cb.on_audio_frame = [&](std::span<const int32_t>, bool) {
      if (items++ == 0) first_item = Now();
      return Status::Ok();
    };
    cb.on_pcm = [&](std::span<const float> pcm) {
      if (samples == 0 && !pcm.empty()) first_audio = Now();
      samples += pcm.size();
      return Status::Ok();
    };
    t0 = Now();
    auto r = c.Generate(o, cb);
    const double total = Now() - t0;
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    const double audio_s = static_cast<double>(samples) / (*model)->sample_rate();
    std::printf(
        "threads %d: encoder 10 s clip in %.3f s (RTF %.3f) | question 4.9 s encoded in %.3f s, prefill + "
        "first item %.2f s | first audio sample after %.2f s | answer: %d text + %d frames, %.2f s of "
        "speech in %.2f s (RTF %.2f, %s real time)\n",
        threads, encode, encode / 10.0, question_encode, first_item - t0, samples ? first_audio - t0 : NAN,
        r->text_tokens, r->audio_frames, audio_s, total, audio_s > 0 ? total / audio_s : NAN,
        audio_s >= total ? "faster than" : "slower than");
  }
  return 0;
}

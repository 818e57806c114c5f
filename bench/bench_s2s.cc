// Speech in and speech-to-speech at the real LFM2.5-Audio size (random weights
// in the real layout), through the public API, at 1 and 2 threads:
//   - front end + encoder real-time factor on a 10 s clip;
//   - prefill tokens/s for a spoken question (tests/data/inputs/question.wav, 4.9 s);
//   - time to the first audio sample of an interleaved answer;
//   - real-time factor of the whole interleaved answer (wall time ÷ audio produced, the prompt's
//     prefill included: "rtf"), and of the answer once it speaks (from the first PCM to the end ÷
//     the audio produced after the first chunk: "rtf_speaking", what a live listener waits on);
//   - the same answer warm ("rtf_warm", "first_audio_warm_s", "prefill_warm_s"): the system prompt
//     and the user turn's opening prefilled before the question arrives (Conversation::Prefill, as a
//     live session does while the user speaks), so only the question and what follows it remain;
//   - TTS: time to the first audio sample and real-time factor of a sentence.
//   bench_s2s [--model DIR] [--threads 1,2] [--max-new N] [--json]
// DIR is a Hugging Face snapshot or a GGUF release (folder or one of its
// files). --json prints one line per configuration: {"bench":"s2s"|"tts",
// "format","threads","cpu","rtf","first_audio_s",...,"read_gb_s"}; first_audio_s for s2s
// counts from the end of the question (its encoding included); read_gb_s is the read rate
// (bench::MeasureReadBandwidth, the same threads) taken just before, this minute's floor; the
// engine's stage clocks (StageTimings) of the answer: "prefill_s", "step_ms" (per backbone step, the
// text head included where it ran), "depth_ms" and "detokenizer_ms" (per audio frame); "amx" whether
// the kernels use AMX (LFMVOX_BENCH_AMX=0: as on a CPU without it, bench_util.h).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.h"
#include "lfmvox/lfmvox.h"
#include "tools/checkpoint_gen.h"

using namespace lfmvox;
using bench::Now;

namespace {
// A stage clock (StageTimings) per step or frame.
double PerCount(double ms, int count) { return count > 0 ? ms / count : NAN; }

// One spoken answer's clocks: t0 when the question has been heard (its file read and encoded by then:
// question_encode), first_item / first_audio / t_end on the answer's way.
struct Answer {
  double question_encode = 0, t0 = 0, first_item = 0, first_audio = 0, t_end = 0;
  size_t samples = 0, first_samples = 0;
  GenerateSummary summary;
  double audio_s(const AudioModel& m) const { return static_cast<double>(samples) / m.sample_rate(); }
  // Wall time ÷ audio produced, the prompt's prefill included.
  double rtf(const AudioModel& m) const { return samples ? (t_end - t0) / audio_s(m) : NAN; }
  // From the first PCM to the end ÷ the audio after the first chunk: what a live listener waits on.
  double rtf_speaking(const AudioModel& m) const {
    const double after = static_cast<double>(samples - first_samples) / m.sample_rate();
    return after > 0 ? (t_end - first_audio) / after : NAN;
  }
  double first_audio_s() const { return samples ? question_encode + (first_audio - t0) : NAN; }
};

// The speech-to-speech turn on a fresh conversation: the default system prompt, the user's turn holding
// `question`, the interleaved answer. `warm`: everything before the question prefilled first
// (Conversation::Prefill, what a live session does while the user speaks), outside the clocks.
Status RunAnswer(Conversation& c, const std::string& question, const GenerateOptions& o, bool warm,
                 Answer* a) {
  c.Reset();
  LFM_RETURN_IF_ERROR(c.StartChat());  // the model's default system prompt
  LFM_RETURN_IF_ERROR(c.StartTurn("user"));
  if (warm) LFM_RETURN_IF_ERROR(c.Prefill());
  double t = Now();
  LFM_RETURN_IF_ERROR(c.AddAudioFile(question));
  a->question_encode = Now() - t;
  LFM_RETURN_IF_ERROR(c.EndTurn());
  LFM_RETURN_IF_ERROR(c.StartTurn("assistant"));
  int items = 0;
  OutputCallbacks cb;
  cb.on_text = [&](int32_t, std::string_view) {
    if (items++ == 0) a->first_item = Now();
    return Status::Ok();
  };
  cb.on_audio_frame = [&](std::span<const int32_t>, bool) {
    if (items++ == 0) a->first_item = Now();
    return Status::Ok();
  };
  cb.on_pcm = [&](std::span<const float> pcm) {
    if (a->samples == 0 && !pcm.empty()) {
      a->first_audio = Now();
      a->first_samples = pcm.size();
    }
    a->samples += pcm.size();
    return Status::Ok();
  };
  a->t0 = Now();
  Result<GenerateSummary> r = c.Generate(o, cb);
  a->t_end = Now();
  LFM_RETURN_IF_ERROR(r.status());
  a->summary = *r;
  return Status::Ok();
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir, threads_arg = "1,2";
  int max_new = 48;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--json") {
      json = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (k == "--model")
      dir = argv[++i];
    else if (k == "--max-new")
      max_new = std::max(8, std::atoi(argv[++i]));
    else if (k == "--threads")
      threads_arg = argv[++i];
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
  const std::string format = bench::ModelFormat(dir);
  const bool amx = bench::ApplyAmxSetting();
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
  for (const std::string& tok : bench::SplitList(threads_arg)) {
    const int threads = std::max(1, std::atoi(tok.c_str()));
    // This minute's read rate with these threads (the machine's memory rate moves more than most changes).
    const double read_gbs = bench::MeasureReadGBs(threads);
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
    // The speech-to-speech prompt around the spoken question, cold: Generate runs the whole prompt's
    // prefill (system prompt included) first, so the time to the first item includes it.
    const GenerateOptions o = [&] {
      GenerateOptions g = GenerateOptions::ForSpeechToSpeech(**model);
      g.max_new_tokens = max_new;
      return g;
    }();
    Answer cold, warm;
    if (Status s = RunAnswer(c, src + "/tests/data/inputs/question.wav", o, false, &cold); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    // Warm, as a live conversation: the system prompt and the user turn's opening prefilled while the
    // user speaks (Conversation::Prefill), the clock started when the question has been heard.
    if (Status s = RunAnswer(c, src + "/tests/data/inputs/question.wav", o, true, &warm); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    const StageTimings& st = cold.summary.timings;
    const double audio_s = cold.audio_s(**model);
    if (json) {
      std::printf(
          "{\"bench\":\"s2s\",\"format\":\"%s\",\"threads\":%d,\"cpu\":\"%s\",\"amx\":%s,\"rtf\":%.3f,"
          "\"rtf_speaking\":%.3f,\"first_audio_s\":%.3f,\"rtf_warm\":%.3f,\"first_audio_warm_s\":%.3f,"
          "\"question_encode_s\":%.3f,\"encoder_rtf\":%.4f,\"text_tokens\":%d,"
          "\"audio_frames\":%d,\"audio_s\":%.2f,\"prefill_s\":%.3f,\"prefill_warm_s\":%.3f,\"step_ms\":%.2f,"
          "\"depth_ms\":%.2f,\"detokenizer_ms\":%.2f,\"read_gb_s\":%.2f,\"loadavg\":%.2f}\n",
          format.c_str(), threads, bench::CpuModel().c_str(), amx ? "true" : "false", cold.rtf(**model),
          cold.rtf_speaking(**model), cold.first_audio_s(), warm.rtf(**model), warm.first_audio_s(),
          cold.question_encode, encode / 10.0, cold.summary.text_tokens, cold.summary.audio_frames, audio_s,
          st.prefill_ms * 1e-3, warm.summary.timings.prefill_ms * 1e-3,
          PerCount(st.backbone_step_ms, st.backbone_steps), PerCount(st.depth_ms, st.depth_frames),
          PerCount(st.detokenizer_ms, st.depth_frames), read_gbs, bench::LoadAverage());
    } else {
      std::printf(
          "threads %d: encoder 10 s clip in %.3f s (RTF %.3f) | question 4.9 s encoded in %.3f s, prefill + "
          "first item %.2f s | first audio sample %.2f s after the question | answer: %d text + %d frames, "
          "%.2f s of speech in %.2f s (RTF %.2f; %.2f once speaking) | warm (system prompt prefilled while "
          "the user speaks): prefill %.3f s, first audio %.2f s, RTF %.2f | read %.1f GB/s; prefill %.3f s, "
          "per step %.2f ms, per frame: depth head %.2f ms, detokenizer %.2f ms\n",
          threads, encode, encode / 10.0, cold.question_encode, cold.first_item - cold.t0,
          cold.first_audio_s(), cold.summary.text_tokens, cold.summary.audio_frames, audio_s,
          cold.t_end - cold.t0, cold.rtf(**model), cold.rtf_speaking(**model),
          warm.summary.timings.prefill_ms * 1e-3, warm.first_audio_s(), warm.rtf(**model), read_gbs,
          st.prefill_ms * 1e-3, PerCount(st.backbone_step_ms, st.backbone_steps),
          PerCount(st.depth_ms, st.depth_frames), PerCount(st.detokenizer_ms, st.depth_frames));
    }
    // TTS: one sentence, sequential generation, sampled audio.
    c.Reset();
    if (Status s = c.StartSpeech((*model)->default_voice(),
                                 "The quick brown fox jumps over the lazy dog near the river bank.");
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    // Random weights never choose <|audio_start|> themselves; the prompt gives
    // it (a trained model's first generated token), so every item is a frame.
    (void)c.AddText("<|audio_start|>");
    GenerateOptions to = GenerateOptions::ForTts(**model);
    to.max_new_tokens = max_new;
    size_t tts_samples = 0;
    double tts_first = 0;
    OutputCallbacks tcb;
    tcb.on_pcm = [&](std::span<const float> pcm) {
      if (tts_samples == 0 && !pcm.empty()) tts_first = Now();
      tts_samples += pcm.size();
      return Status::Ok();
    };
    t0 = Now();
    auto tr = c.Generate(to, tcb);
    const double tts_total = Now() - t0;
    if (!tr.ok()) {
      std::fprintf(stderr, "%s\n", tr.status().ToString().c_str());
      return 1;
    }
    const double tts_audio = static_cast<double>(tts_samples) / (*model)->sample_rate();
    const double tts_rtf = tts_audio > 0 ? tts_total / tts_audio : NAN;
    const StageTimings& tt = tr->timings;
    if (json) {
      std::printf(
          "{\"bench\":\"tts\",\"format\":\"%s\",\"threads\":%d,\"cpu\":\"%s\",\"amx\":%s,\"rtf\":%.3f,"
          "\"first_audio_s\":%.3f,\"audio_frames\":%d,\"audio_s\":%.2f,\"step_ms\":%.2f,\"depth_ms\":%.2f,"
          "\"detokenizer_ms\":%.2f,\"loadavg\":%.2f}\n",
          format.c_str(), threads, bench::CpuModel().c_str(), amx ? "true" : "false", tts_rtf,
          tts_samples ? tts_first - t0 : NAN, tr->audio_frames, tts_audio,
          PerCount(tt.backbone_step_ms, tt.backbone_steps), PerCount(tt.depth_ms, tt.depth_frames),
          PerCount(tt.detokenizer_ms, tt.depth_frames), bench::LoadAverage());
    } else {
      std::printf(
          "threads %d: TTS %d frames, %.2f s of speech in %.2f s (RTF %.2f), first audio after %.2f s; per "
          "frame: "
          "backbone step %.2f ms, depth head %.2f ms, detokenizer %.2f ms\n",
          threads, tr->audio_frames, tts_audio, tts_total, tts_rtf, tts_samples ? tts_first - t0 : NAN,
          PerCount(tt.backbone_step_ms, tt.backbone_steps), PerCount(tt.depth_ms, tt.depth_frames),
          PerCount(tt.detokenizer_ms, tt.depth_frames));
    }
    std::fflush(stdout);
  }
  return 0;
}

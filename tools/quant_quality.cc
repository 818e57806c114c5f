// What a weight format costs in accuracy, stage by stage, against the same
// model computed from its float weights (the snapshot's bf16, widened exactly
// to f32): one JSON line per stage.
//   lfmvox-quant-quality --model SNAPSHOT [--types f16,q8_0,q4_0] [--steps N] [--clip WAV]
// For each type the snapshot is written as a GGUF release (lfmvox quantize) to
// a temp folder and loaded next to the snapshot; then
//   - encoder: the adapter output for the clip (max abs, error ÷ scale, SNR);
//   - backbone / text_logits: every teacher-forced step's last hidden state
//     and text logits along a reference greedy sequence;
//   - depthformer: greedy codes for every step's hidden state (the reference
//     model's), as code and whole-frame agreement rates;
//   - greedy agreement: teacher-forced next-item agreement over the sequence
//     (each model predicts the next item from the same history);
//   - detokenizer: PCM of the reference frames (SNR).
// Random weights bound the numerical error; they say nothing about the
// perceptual quality of a trained model.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "blocks/sampling.h"
#include "io/audio_file.h"
#include "io/npy.h"
#include "models/lfm25_audio/gguf_release.h"
#include "models/lfm25_audio/session.h"
#include "threading/thread_team.h"

using namespace lfmvox;

namespace {

// Error of `got` against `ref`: max |diff|, that over max |ref|, and SNR in dB.
struct Err {
  double max_abs = 0, scale = 0, sig = 0, noise = 0;
  size_t n = 0;
  void Add(const float* got, const float* ref, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      const double d = static_cast<double>(got[i]) - ref[i];
      max_abs = std::max(max_abs, std::fabs(d));
      scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
      sig += static_cast<double>(ref[i]) * ref[i];
      noise += d * d;
    }
    n += count;
  }
  double rel() const { return scale > 0 ? max_abs / scale : 0; }
  double snr_db() const { return noise > 0 ? 10 * std::log10(sig / noise) : 999; }
};

void PrintErr(const std::string& model, const std::string& type, const char* stage, const Err& e) {
  std::printf(
      "{\"bench\":\"quality\",\"model\":\"%s\",\"format\":\"%s\",\"stage\":\"%s\",\"max_abs\":%.3g,"
      "\"rel_max\":%.3g,\"snr_db\":%.1f,\"values\":%zu}\n",
      model.c_str(), type.c_str(), stage, e.max_abs, e.rel(), e.snr_db(), e.n);
}

int Argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

struct Loaded {
  std::unique_ptr<Lfm25AudioModel> model;
  std::unique_ptr<Lfm25Session> session;
  std::optional<DepthformerScratch> depth;
  std::optional<MelFeatures> mel;
};

Result<Loaded> Open(const std::string& dir, size_t context) {
  Loaded l;
  LFM_ASSIGN_OR_RETURN(l.model, Lfm25AudioModel::Load(dir));
  LFM_ASSIGN_OR_RETURN(l.session, Lfm25Session::Create(*l.model, {.threads = 2, .context = context}));
  LFM_ASSIGN_OR_RETURN(DepthformerScratch d, DepthformerScratch::Create(l.model->depthformer(), 1, 2));
  l.depth.emplace(std::move(d));
  return l;
}

// The next item each model predicts greedily after the current history: a
// text id (is_text) or a frame of codes, and the hidden state and logits.
struct Prediction {
  std::vector<float> h, logits;
  std::vector<int32_t> frame;
};

Status Predict(Loaded& l, ThreadTeam& team, const float* h_for_depth, Prediction* p) {
  LFM_ASSIGN_OR_RETURN(const float* h, l.session->Prefill(team));
  const size_t H = static_cast<size_t>(l.model->config().lfm.hidden_size);
  p->h.assign(h, h + H);
  p->logits.resize(static_cast<size_t>(l.model->backbone().vocab()));
  l.model->backbone().TextLogits(h, p->logits.data(), team);
  LFM_ASSIGN_OR_RETURN(
      Sampler greedy,
      Sampler::Create(SamplingParams::Greedy(), static_cast<size_t>(l.model->backbone().audio_vocab())));
  Rng rng(1);
  p->frame.resize(static_cast<size_t>(l.model->config().codebooks));
  return SampleAudioFrame(l.model->depthformer(), *l.depth, h_for_depth ? h_for_depth : h, greedy, rng,
                          p->frame.data(), team, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  std::string snapshot, types = "f16,q8_0,q4_0", clip;
  int steps = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model") snapshot = argv[i + 1];
    if (k == "--types") types = argv[i + 1];
    if (k == "--steps") steps = std::max(4, std::atoi(argv[i + 1]));
    if (k == "--clip") clip = argv[i + 1];
  }
  if (snapshot.empty()) {
    std::fprintf(stderr,
                 "usage: lfmvox-quant-quality --model SNAPSHOT [--types f16,q8_0,q4_0] [--steps N]\n");
    return 2;
  }
  const std::string name = std::filesystem::path(snapshot).filename().string();
  ThreadTeam team(2);
  auto ref = Open(snapshot, static_cast<size_t>(steps) + 256);
  if (!ref.ok()) {
    std::fprintf(stderr, "%s\n", ref.status().ToString().c_str());
    return 1;
  }
  const SpecialTokens& sp = ref->model->special();
  // The prompt: a TTS request, then <|audio_start|>; the reference sequence is
  // the reference model's greedy frames, one text step every 8 frames (so
  // both heads are exercised along the way).
  std::vector<int32_t> prompt = {sp.start_of_text, sp.im_start};
  if (auto t = ref->model->tokenizer().Encode("system\nPerform TTS. Use the US female voice."); t.ok())
    prompt.insert(prompt.end(), t->begin(), t->end());
  prompt.insert(prompt.end(), {sp.im_end, sp.im_start});
  if (auto t = ref->model->tokenizer().Encode("user\nThe quick brown fox jumps over the lazy dog."); t.ok())
    prompt.insert(prompt.end(), t->begin(), t->end());
  prompt.insert(prompt.end(), {sp.im_end, sp.im_start});
  if (auto t = ref->model->tokenizer().Encode("assistant\n"); t.ok())
    prompt.insert(prompt.end(), t->begin(), t->end());
  // The oracle checkpoints' embedding tables are smaller than the tokenizer:
  // their traces' TTS prompt uses only ids they have.
  if (auto ids = ReadNpy(snapshot + "/traces/tts__text_ids.npy"); ids.ok()) {
    prompt.clear();
    for (int64_t id : ids->ToInt64()) prompt.push_back(static_cast<int32_t>(id));
  }
  prompt.push_back(sp.audio_start);

  for (const std::string& type : [&] {
         std::vector<std::string> v;
         size_t a = 0;
         while (a <= types.size()) {
           const size_t b = std::min(types.find(',', a), types.size());
           if (b > a) v.push_back(types.substr(a, b - a));
           a = b + 1;
         }
         return v;
       }()) {
    Lfm25GgufWriteOptions o;
    if (!ParseGgufWriteType(type, &o.type)) {
      std::fprintf(stderr, "unknown type %s\n", type.c_str());
      return 2;
    }
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("lfmvox_quality_" + name + "_" + type)).string();
    if (auto w = WriteLfm25GgufRelease(snapshot, dir, o); !w.ok()) {
      std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
      return 1;
    }
    auto q = Open(dir, static_cast<size_t>(steps) + 256);
    if (!q.ok()) {
      std::fprintf(stderr, "%s\n", q.status().ToString().c_str());
      return 1;
    }
    // Encoder on the clip (or a chirp).
    {
      std::vector<float> wave(16000 * 4);
      for (size_t i = 0; i < wave.size(); ++i) {
        const double t = static_cast<double>(i) / 16000;
        wave[i] = static_cast<float>(0.3 * std::sin(2 * M_PI * (200 + 150 * t) * t));
      }
      auto mel = LogMelFrontEnd::Create(ref->model->mel_config());
      MelFeatures f;
      if (mel.ok() && mel->Compute(wave, &f).ok()) {
        const size_t T = ConformerConfig::SubsampledFrames(f.frames);
        const size_t H = static_cast<size_t>(ref->model->config().lfm.hidden_size);
        std::vector<float> a(T * H), b(T * H);
        auto sa = EncoderScratch::Create(ref->model->encoder(), f.frames, 2);
        auto sb = EncoderScratch::Create(q->model->encoder(), f.frames, 2);
        if (sa.ok() && sb.ok() &&
            ref->model->encoder().Encode(f.mel.data(), f.frames, a.data(), **sa, team, nullptr).ok() &&
            q->model->encoder().Encode(f.mel.data(), f.frames, b.data(), **sb, team, nullptr).ok()) {
          Err e;
          e.Add(b.data(), a.data(), a.size());
          PrintErr(name, type, "encoder", e);
        }
      }
    }
    // Teacher-forced steps along the reference's greedy sequence.
    ref->session->Reset();
    q->session->Reset();
    (void)ref->session->AppendTokens(prompt);
    (void)q->session->AppendTokens(prompt);
    Err backbone, logits;
    size_t text_steps = 0, text_agree = 0, frames = 0, frame_agree = 0, codes = 0, code_agree = 0;
    std::vector<int32_t> ref_frames;
    for (int i = 0; i < steps; ++i) {
      Prediction pr, pq;
      if (Status s = Predict(*ref, team, nullptr, &pr); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      if (Status s = Predict(*q, team, pr.h.data(), &pq); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      backbone.Add(pq.h.data(), pr.h.data(), pr.h.size());
      logits.Add(pq.logits.data(), pr.logits.data(), pr.logits.size());
      const bool text_step = i % 9 == 8;
      if (text_step) {
        const int a = Argmax(pr.logits), b = Argmax(pq.logits);
        ++text_steps;
        text_agree += a == b;
        (void)ref->session->AppendTokens(std::vector<int32_t>{a});
        (void)q->session->AppendTokens(std::vector<int32_t>{a});
      } else {
        ++frames;
        frame_agree += pr.frame == pq.frame;
        for (size_t k = 0; k < pr.frame.size(); ++k) code_agree += pr.frame[k] == pq.frame[k];
        codes += pr.frame.size();
        // End-of-audio would stop speech: keep the sequence in speech by
        // feeding code 0 in its place (both models see the same history).
        std::vector<int32_t> f = pr.frame;
        for (int32_t& c : f)
          if (c == sp.end_of_audio) c = 0;
        ref_frames.insert(ref_frames.end(), f.begin(), f.end());
        (void)ref->session->AppendAudioOut(f);
        (void)q->session->AppendAudioOut(f);
      }
    }
    PrintErr(name, type, "backbone", backbone);
    PrintErr(name, type, "text_logits", logits);
    std::printf(
        "{\"bench\":\"quality\",\"model\":\"%s\",\"format\":\"%s\",\"stage\":\"greedy\",\"steps\":%d,"
        "\"text_agreement\":%.3f,\"depth_code_agreement\":%.3f,\"depth_frame_agreement\":%.3f}\n",
        name.c_str(), type.c_str(), steps, text_steps ? double(text_agree) / text_steps : 1.0,
        codes ? double(code_agree) / codes : 1.0, frames ? double(frame_agree) / frames : 1.0);
    // The detokenizer on the reference frames.
    if (ref->model->detokenizer() != nullptr && q->model->detokenizer() != nullptr) {
      const size_t n = ref_frames.size() / static_cast<size_t>(ref->model->config().codebooks);
      auto da = Lfm25DetokenizerSession::Create(*ref->model->detokenizer(), n, 2);
      auto db = Lfm25DetokenizerSession::Create(*q->model->detokenizer(), n, 2);
      std::vector<float> pa(n * 1920 + 4096), pb(pa.size());
      if (da.ok() && db.ok()) {
        auto wa = (*da)->Step(ref_frames, pa, team), wb = (*db)->Step(ref_frames, pb, team);
        if (wa.ok() && wb.ok()) {
          Err e;
          e.Add(pb.data(), pa.data(), *wa);
          PrintErr(name, type, "detokenizer_pcm", e);
        }
      }
    }
    std::fflush(stdout);
    std::filesystem::remove_all(dir);
  }
  return 0;
}

// The public speech/text API: AudioModel and Conversation over the family
// interface (family.h), plus the prompt-file parser.
#include <cmath>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/engine_core.h"
#include "api/family.h"
#include "base/guard.h"
#include "base/json_parse.h"
#include "base/status.h"
#include "io/audio_file.h"
#include "io/file_util.h"
#include "io/json_config.h"
#include "lfmvox/lfmvox.h"

namespace lfmvox {

struct AudioModel::Impl {
  std::unique_ptr<FamilyModel> family;
};

struct Conversation::Impl {
  std::shared_ptr<Engine> engine;  // first: destroyed last
  std::shared_ptr<const AudioModel> model;
  std::shared_ptr<FamilyWorker> worker;
  std::unique_ptr<FamilySession> session;
  EngineCore& core() { return *engine->impl_; }
};

AudioModel::AudioModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AudioModel::~AudioModel() = default;

Result<std::shared_ptr<const AudioModel>> AudioModel::Load(const std::string& model_dir,
                                                           const ModelOptions& options) {
  return Guard("AudioModel::Load", [&]() -> Result<std::shared_ptr<const AudioModel>> {
    auto impl = std::make_unique<Impl>();
    LFM_ASSIGN_OR_RETURN(impl->family, LoadFamily(model_dir, options));
    return std::shared_ptr<const AudioModel>(new AudioModel(std::move(impl)));
  });
}

std::string_view AudioModel::family() const { return impl_->family->family(); }
int AudioModel::sample_rate() const { return impl_->family->sample_rate(); }
int AudioModel::num_codebooks() const { return impl_->family->num_codebooks(); }
int AudioModel::audio_vocab() const { return impl_->family->audio_vocab(); }
int AudioModel::samples_per_frame() const { return impl_->family->samples_per_frame(); }
Status AudioModel::CanListen() const { return impl_->family->CanListen(); }
Status AudioModel::CanSpeak() const { return impl_->family->CanSpeak(); }
const std::vector<std::string>& AudioModel::voices() const { return impl_->family->voices(); }
const std::string& AudioModel::default_voice() const { return impl_->family->default_voice(); }
const std::string& AudioModel::default_system_prompt() const {
  return impl_->family->default_system_prompt();
}
std::string AudioModel::TokenText(int32_t id) const { return impl_->family->TokenText(id); }
bool AudioModel::IsSpecialToken(int32_t id) const { return impl_->family->IsSpecialToken(id); }

GenerateOptions GenerateOptions::ForTts(const AudioModel& model) {
  return model.impl_->family->Preset(Task::kTts);
}
GenerateOptions GenerateOptions::ForSpeechToSpeech(const AudioModel& model) {
  return model.impl_->family->Preset(Task::kSpeechToSpeech);
}
GenerateOptions GenerateOptions::ForAsr(const AudioModel& model) {
  return model.impl_->family->Preset(Task::kAsr);
}

Conversation::Conversation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Conversation::~Conversation() = default;

Result<std::unique_ptr<Conversation>> Conversation::Create(std::shared_ptr<const AudioModel> model,
                                                           const ConversationOptions& options) {
  return Guard("Conversation::Create", [&]() -> Result<std::unique_ptr<Conversation>> {
    if (model == nullptr) return InvalidArgument("Conversation::Create needs a loaded model");
    auto impl = std::make_unique<Impl>();
    impl->engine = options.engine;
    if (impl->engine == nullptr) {
      LFM_ASSIGN_OR_RETURN(impl->engine, Engine::Create({.threads = options.threads,
                                                         .max_batch = 1,
                                                         .max_clip_seconds = options.max_clip_seconds}));
    }
    EngineCore& core = impl->core();
    {
      std::lock_guard lock(core.mu);
      LFM_ASSIGN_OR_RETURN(impl->worker, core.WorkerFor(model, *model->impl_->family));
    }
    LFM_ASSIGN_OR_RETURN(impl->session, model->impl_->family->CreateSession(options, core, impl->worker));
    impl->model = std::move(model);
    return std::unique_ptr<Conversation>(new Conversation(std::move(impl)));
  });
}

const AudioModel& Conversation::model() const { return *impl_->model; }

Status Conversation::Begin() {
  return Guard("Conversation::Begin", [&]() -> Status { return impl_->session->Begin(); });
}
Status Conversation::StartTurn(std::string_view role) {
  return Guard("Conversation::StartTurn", [&]() -> Status { return impl_->session->StartTurn(role); });
}
Status Conversation::AddText(std::string_view utf8) {
  return Guard("Conversation::AddText", [&]() -> Status { return impl_->session->AddText(utf8); });
}
Status Conversation::AddTokens(std::span<const int32_t> ids) {
  return Guard("Conversation::AddTokens", [&]() -> Status { return impl_->session->AddTokens(ids); });
}
Status Conversation::AddAudioOut(std::span<const int32_t> frames) {
  return Guard("Conversation::AddAudioOut", [&]() -> Status { return impl_->session->AddAudioOut(frames); });
}
Status Conversation::EndTurn() {
  return Guard("Conversation::EndTurn", [&]() -> Status { return impl_->session->EndTurn(); });
}

Status Conversation::AddAudioFile(const std::string& path) {
  return Guard("Conversation::AddAudioFile", [&]() -> Status {
    // The clip limit is applied from the header before anything is decoded, and decoding stops at the limit
    // where the length is not known up front (an MP3's estimate, a pipe).
    const AudioLimits limits{.max_seconds = impl_->core().options.max_clip_seconds};
    LFM_ASSIGN_OR_RETURN(AudioBuffer audio, ReadAudioFile(path, limits));
    std::lock_guard lock(impl_->core().mu);  // the encoder runs on the engine's pool and scratch
    return impl_->session->AddAudio(audio).WithContext(path);
  });
}

Status Conversation::AddAudio(std::span<const float> samples, int sample_rate, int channels) {
  return Guard("Conversation::AddAudio", [&]() -> Status {
    if (channels < 1 || channels > kMaxAudioChannels) return InvalidArgument("channels must be in [1, 64]");
    if (sample_rate < 1 || sample_rate > kMaxAudioSampleRate) {
      return InvalidArgument(
          StrFormat("sample rate %d Hz is not in [1, %d]", sample_rate, kMaxAudioSampleRate));
    }
    if (samples.empty() || samples.size() % static_cast<size_t>(channels) != 0) {
      return InvalidArgument("audio samples must be a non-empty whole number of frames");
    }
    // The clip limit before the copy, the resampling and the log-mel, so an oversized clip costs nothing.
    const double seconds = static_cast<double>(samples.size() / static_cast<size_t>(channels)) / sample_rate;
    const double max_seconds = impl_->core().options.max_clip_seconds;
    if (seconds > max_seconds) {
      return OutOfRange(
          StrFormat("the clip is %.2f s long; this conversation takes clips of up to %g s (split "
                    "the audio, or raise max_clip_seconds)",
                    seconds, max_seconds));
    }
    for (float v : samples) {
      if (!std::isfinite(v)) return InvalidArgument("audio samples hold NaN or infinity");
    }
    AudioBuffer audio;
    audio.sample_rate = sample_rate;
    audio.channels = channels;
    audio.samples.assign(samples.begin(), samples.end());
    std::lock_guard lock(impl_->core().mu);
    return impl_->session->AddAudio(audio);
  });
}

Status Conversation::StartSpeech(std::string_view voice, std::string_view text) {
  return Guard("Conversation::StartSpeech", [&]() -> Status {
    // Nothing to say is the caller's mistake, not a prompt: the model would speak whatever it liked.
    if (text.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos) {
      return InvalidArgument("the text to speak is empty; give the words to say");
    }
    return impl_->session->StartSpeech(voice, text);
  });
}

Status Conversation::StartAsr() {
  return Guard("Conversation::StartAsr", [&]() -> Status { return impl_->session->StartAsr(); });
}

Status Conversation::StartChat(std::string_view system) {
  return Guard("Conversation::StartChat", [&]() -> Status {
    if (system.empty()) system = impl_->model->default_system_prompt();
    LFM_RETURN_IF_ERROR(Begin());
    LFM_RETURN_IF_ERROR(StartTurn("system"));
    LFM_RETURN_IF_ERROR(AddText(system));
    return EndTurn();
  });
}

Result<GenerateSummary> Conversation::Generate(const GenerateOptions& options, const OutputCallbacks& out) {
  return Guard("Conversation::Generate", [&]() -> Result<GenerateSummary> {
    LFM_RETURN_IF_ERROR(BeginGenerate(options, out));
    Conversation* self[1] = {this};
    while (generating()) {
      Result<size_t> r = impl_->engine->Step(self);
      if (!r.ok()) {
        (void)FinishGenerate();
        return r.status();
      }
    }
    return FinishGenerate();
  });
}

Status Conversation::BeginGenerate(const GenerateOptions& options, const OutputCallbacks& out) {
  return Guard("Conversation::BeginGenerate", [&]() -> Status {
    if (options.max_new_tokens < 0) return InvalidArgument("max_new_tokens must not be negative");
    std::lock_guard lock(impl_->core().mu);
    return impl_->session->BeginGenerate(options, out);
  });
}

bool Conversation::generating() const { return impl_->session->generating(); }

Status Conversation::Prefill() {
  return Guard("Conversation::Prefill", [&]() -> Status {
    std::lock_guard lock(impl_->core().mu);
    return impl_->session->Prefill();
  });
}

Result<GenerateSummary> Conversation::FinishGenerate() {
  return Guard("Conversation::FinishGenerate", [&]() -> Result<GenerateSummary> {
    std::lock_guard lock(impl_->core().mu);
    return impl_->session->FinishGenerate();
  });
}

void Conversation::Cancel() { impl_->session->Cancel(); }

Status Conversation::TruncateSpeech(size_t samples) {
  return Guard("Conversation::TruncateSpeech",
               [&]() -> Status { return impl_->session->TruncateSpeech(samples); });
}

Result<size_t> Engine::Step(std::span<Conversation* const> conversations) {
  return Guard("Engine::Step", [&]() -> Result<size_t> {
    Impl& e = *impl_;
    if (conversations.size() > e.options.max_batch) {
      return OutOfRange(StrFormat("%zu conversations in one step exceed the engine's max_batch of %zu",
                                  conversations.size(), e.options.max_batch));
    }
    std::lock_guard lock(e.mu);
    e.pending.clear();
    for (Conversation* c : conversations) {
      if (c == nullptr) return InvalidArgument("a null conversation in Engine::Step");
      if (c->impl_->engine.get() != this)
        return InvalidArgument("a conversation of another engine in Engine::Step");
      if (c->impl_->session->generating()) e.pending.push_back(c);
    }
    // One batched step per model: the first pending conversation's model, then the next left over.
    while (!e.pending.empty()) {
      Conversation::Impl& first = *e.pending.front()->impl_;
      e.group.clear();
      size_t kept = 0;
      for (Conversation* c : e.pending) {
        if (c->impl_->model == first.model) {
          e.group.push_back(c->impl_->session.get());
        } else {
          e.pending[kept++] = c;
        }
      }
      LFM_RETURN_IF_ERROR(first.model->impl_->family->Step(e.group, *first.worker, e.team));
      e.pending.resize(kept);
    }
    size_t left = 0;
    for (Conversation* c : conversations) left += c->impl_->session->generating();
    return left;
  });
}

void Conversation::Reset() { impl_->session->Reset(); }

ContextStats Conversation::context_stats() const { return impl_->session->context_stats(); }

// ---------------------------------------------------------------------------
// Prompt files.

namespace {

// A JSON integer in [lo, hi], or false.
bool IntIn(const nlohmann::json& x, int64_t lo, int64_t hi, int32_t* out) {
  if (!x.is_number_integer()) return false;
  if (x.is_number_unsigned()) {
    const uint64_t u = x.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return false;
    *out = static_cast<int32_t>(u);
    return static_cast<int64_t>(u) >= lo;
  }
  const int64_t v = x.get<int64_t>();
  if (v < lo || v > hi) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

}  // namespace

// A prompt is a list of segments ({"text"}, {"ids": [...]}, {"audio": path}, {"audio_out": [[...]]}):
// three levels; its values are its ids and codes.
constexpr JsonLimits kPromptLimits = {.max_depth = 8, .max_values = size_t{1} << 22};

Status Conversation::AddPromptJson(std::string_view text, const std::string& base_dir) {
  return Guard("Conversation::AddPromptJson", [&]() -> Status {
    Result<nlohmann::json> parsed = ParseJson(text, "the prompt", kPromptLimits);
    if (!parsed.ok()) return InvalidArgument(parsed.status().message());
    const nlohmann::json& j = *parsed;
    if (!j.is_array())
      return InvalidArgument("the prompt must be a JSON list of segments like {\"text\": \"...\"}");
    const int C = impl_->model->num_codebooks();
    const int vocab = impl_->model->audio_vocab();
    std::vector<int32_t> v;
    for (size_t i = 0; i < j.size(); ++i) {
      const nlohmann::json& seg = j[i];
      const std::string where = "segment " + std::to_string(i);
      if (!seg.is_object() || seg.size() != 1) {
        return InvalidArgument(where +
                               ": each segment is an object with one key: text, ids, audio_out or audio");
      }
      const std::string& key = seg.begin().key();
      const nlohmann::json& val = seg.begin().value();
      v.clear();
      if (key == "text") {
        if (!val.is_string()) return InvalidArgument(where + ": \"text\" must be a string");
        LFM_RETURN_IF_ERROR(AddText(val.get<std::string>()).WithContext(where));
      } else if (key == "ids") {
        if (!val.is_array()) return InvalidArgument(where + ": \"ids\" must be a list of token ids");
        for (size_t k = 0; k < val.size(); ++k) {
          int32_t id;
          if (!IntIn(val[k], 0, INT32_MAX, &id)) {
            return InvalidArgument(StrFormat("%s: \"ids\" entry %zu is %s, not a non-negative integer",
                                             where.c_str(), k, JsonPreview(val[k]).c_str()));
          }
          v.push_back(id);
        }
        LFM_RETURN_IF_ERROR(AddTokens(v).WithContext(where));
      } else if (key == "audio_out") {
        if (!val.is_array())
          return InvalidArgument(where + ": \"audio_out\" must be a list of frames of codes");
        for (size_t f = 0; f < val.size(); ++f) {
          const nlohmann::json& frame = val[f];
          if (!frame.is_array() || frame.size() != static_cast<size_t>(C)) {
            return InvalidArgument(StrFormat("%s: \"audio_out\" frame %zu must be a list of exactly %d codes",
                                             where.c_str(), f, C));
          }
          for (size_t k = 0; k < frame.size(); ++k) {
            int32_t code;
            if (!IntIn(frame[k], 0, vocab - 1, &code)) {
              return InvalidArgument(
                  StrFormat("%s: \"audio_out\" frame %zu code %zu is %s, not an integer in [0, %d)",
                            where.c_str(), f, k, JsonPreview(frame[k]).c_str(), vocab));
            }
            v.push_back(code);
          }
        }
        LFM_RETURN_IF_ERROR(AddAudioOut(v).WithContext(where));
      } else if (key == "audio") {
        if (!val.is_string()) return InvalidArgument(where + ": \"audio\" must be a file name");
        std::filesystem::path file(val.get<std::string>());
        if (file.is_relative()) file = std::filesystem::path(base_dir) / file;
        LFM_RETURN_IF_ERROR(AddAudioFile(file.string()).WithContext(where));
      } else {
        return InvalidArgument(where + ": unknown segment key \"" + key +
                               "\" (text, ids, audio_out or audio)");
      }
    }
    return Status::Ok();
  });
}

Status Conversation::AddPromptFile(const std::string& path) {
  return Guard("Conversation::AddPromptFile", [&]() -> Status {
    // A prompt is text and code lists; 64 MiB bounds a wrong path (a device, a huge file).
    LFM_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path, uint64_t{64} << 20));
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    return AddPromptJson(text, parent.empty() ? std::string(".") : parent.string()).WithContext(path);
  });
}

}  // namespace lfmvox

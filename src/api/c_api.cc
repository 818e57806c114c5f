// The C API (include/lfmvox/lfmvox_c.h) over the public C++ API. Every entry
// point runs inside Guard: a Status becomes the return code and the thread's
// last error, and no exception (allocation failure included) crosses it.
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "lfmvox/lfmvox.h"
#include "lfmvox/lfmvox_c.h"

struct lfmvox_model {
  std::shared_ptr<const lfmvox::AudioModel> model;
  std::vector<const char*> voices;  // pointers into model->voices()
};

struct lfmvox_engine {
  std::shared_ptr<lfmvox::Engine> engine;
};

struct lfmvox_conversation {
  std::unique_ptr<lfmvox::Conversation> conv;
  bool word_timestamps = false;           // lfmvox_conversation_set_word_timestamps
  std::vector<lfmvox::WordTiming> words;  // the last generation's
};

struct lfmvox_detokenizer {
  std::shared_ptr<const lfmvox::DetokenizerModel> model;
};

struct lfmvox_detok_stream {
  std::unique_ptr<lfmvox::DetokenizerStream> stream;
};

namespace {

using lfmvox::Status;
using lfmvox::StatusCode;

thread_local std::string last_error;

int Code(StatusCode c) {
  switch (c) {
    case StatusCode::kOk:
      return LFMVOX_OK;
    case StatusCode::kInvalidArgument:
      return LFMVOX_INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return LFMVOX_NOT_FOUND;
    case StatusCode::kDataLoss:
      return LFMVOX_DATA_LOSS;
    case StatusCode::kOutOfRange:
      return LFMVOX_OUT_OF_RANGE;
    case StatusCode::kUnimplemented:
      return LFMVOX_UNIMPLEMENTED;
    case StatusCode::kInternal:
      return LFMVOX_INTERNAL;
    case StatusCode::kIo:
      return LFMVOX_IO;
    case StatusCode::kCancelled:
      return LFMVOX_CANCELLED;
    case StatusCode::kOutOfMemory:
      return LFMVOX_NO_MEMORY;
  }
  return LFMVOX_INTERNAL;
}

// Records the message of a failed call; the code is the return value.
int Fail(int code, const char* message) {
  try {
    last_error = message;
  } catch (...) {
    // The message cannot be stored; the code still says what happened.
  }
  return code;
}

int Report(const Status& s) { return s.ok() ? LFMVOX_OK : Fail(Code(s.code()), s.message().c_str()); }

// Runs `fn` (returning Status) with every exception turned into a code.
template <typename Fn>
int Guard(Fn&& fn) noexcept {
  try {
    return Report(fn());
  } catch (const std::bad_alloc&) {
    return Fail(LFMVOX_NO_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Fail(LFMVOX_INTERNAL, e.what());
  } catch (...) {
    return Fail(LFMVOX_INTERNAL, "unknown exception inside lfmvox");
  }
}

Status NullArg(const char* what) { return lfmvox::InvalidArgument(std::string(what) + " is NULL"); }

std::string_view View(const char* s) { return s ? std::string_view(s) : std::string_view(); }

// The C++ status of a C callback's return value.
Status FromCallback(int rc, const char* which, bool* cancelled) {
  if (rc == 0) return Status::Ok();
  *cancelled = true;
  return Status(StatusCode::kCancelled, std::string(which) + " returned " + std::to_string(rc));
}

lfmvox::GenerateOptions ToCpp(const lfmvox_generate_options& o) {
  lfmvox::GenerateOptions g;
  g.mode = o.mode == LFMVOX_MODE_INTERLEAVED ? lfmvox::GenerationMode::kInterleaved
                                             : lfmvox::GenerationMode::kSequential;
  g.max_new_tokens = o.max_new_tokens;
  g.text = {o.text_temperature, o.text_top_k};
  g.audio = {o.audio_temperature, o.audio_top_k};
  return g;
}

void ToC(const lfmvox::GenerateOptions& g, lfmvox_generate_options* o) {
  o->mode = g.mode == lfmvox::GenerationMode::kInterleaved ? LFMVOX_MODE_INTERLEAVED : LFMVOX_MODE_SEQUENTIAL;
  o->max_new_tokens = g.max_new_tokens;
  o->text_temperature = g.text.temperature;
  o->text_top_k = g.text.top_k;
  o->audio_temperature = g.audio.temperature;
  o->audio_top_k = g.audio.top_k;
}

}  // namespace

extern "C" {

const char* lfmvox_last_error(void) { return last_error.c_str(); }

const char* lfmvox_status_name(int status) {
  switch (status) {
    case LFMVOX_OK:
      return "ok";
    case LFMVOX_CANCELLED:
      return "cancelled";
    case LFMVOX_NO_MEMORY:
      return "out of memory";
    default:
      break;
  }
  if (status >= LFMVOX_INVALID_ARGUMENT && status <= LFMVOX_IO) {
    return lfmvox::StatusCodeName(static_cast<StatusCode>(status));
  }
  return "unknown status";
}

// ---------------------------------------------------------------------------
// Models.

int lfmvox_model_load(const char* dir, lfmvox_model** out) {
  return Guard([&]() -> Status {
    if (out == nullptr) return NullArg("lfmvox_model_load: out");
    *out = nullptr;
    if (dir == nullptr) return NullArg("lfmvox_model_load: dir");
    auto m = lfmvox::AudioModel::Load(dir);
    if (!m.ok()) return m.status();
    auto h = std::make_unique<lfmvox_model>();
    h->model = std::move(m).value();
    for (const std::string& v : h->model->voices()) h->voices.push_back(v.c_str());
    *out = h.release();
    return Status::Ok();
  });
}

void lfmvox_model_free(lfmvox_model* model) { delete model; }

int lfmvox_model_get_info(const lfmvox_model* model, lfmvox_model_info* out) {
  return Guard([&]() -> Status {
    if (model == nullptr || out == nullptr) return NullArg("lfmvox_model_get_info: model or out");
    const lfmvox::AudioModel& m = *model->model;
    out->family = m.family().data();  // a NUL-terminated literal
    out->sample_rate = m.sample_rate();
    out->num_codebooks = m.num_codebooks();
    out->audio_vocab = m.audio_vocab();
    out->samples_per_frame = m.samples_per_frame();
    return Status::Ok();
  });
}

int lfmvox_model_voices(const lfmvox_model* model, const char* const** voices, size_t* count) {
  return Guard([&]() -> Status {
    if (model == nullptr || voices == nullptr || count == nullptr) {
      return NullArg("lfmvox_model_voices: model, voices or count");
    }
    *voices = model->voices.data();
    *count = model->voices.size();
    return Status::Ok();
  });
}

int lfmvox_model_can_listen(const lfmvox_model* model) {
  return Guard([&]() -> Status {
    if (model == nullptr) return NullArg("lfmvox_model_can_listen: model");
    return model->model->CanListen();
  });
}

int lfmvox_model_can_speak(const lfmvox_model* model) {
  return Guard([&]() -> Status {
    if (model == nullptr) return NullArg("lfmvox_model_can_speak: model");
    return model->model->CanSpeak();
  });
}

int lfmvox_model_default_system_prompt(const lfmvox_model* model, const char** prompt) {
  return Guard([&]() -> Status {
    if (model == nullptr || prompt == nullptr) return NullArg("lfmvox_model_default_system_prompt: argument");
    *prompt = model->model->default_system_prompt().c_str();
    return Status::Ok();
  });
}

int lfmvox_model_token_text(const lfmvox_model* model, int32_t id, char* buf, size_t capacity,
                            size_t* length) {
  return Guard([&]() -> Status {
    if (model == nullptr || length == nullptr) return NullArg("lfmvox_model_token_text: model or length");
    if (buf == nullptr && capacity != 0) return NullArg("lfmvox_model_token_text: buf (with capacity > 0)");
    const std::string t = model->model->TokenText(id);
    *length = t.size();
    if (capacity > 0) {
      const size_t n = std::min(t.size(), capacity - 1);
      std::memcpy(buf, t.data(), n);
      buf[n] = '\0';
    }
    return Status::Ok();
  });
}

int lfmvox_model_is_special_token(const lfmvox_model* model, int32_t id, int* special) {
  return Guard([&]() -> Status {
    if (model == nullptr || special == nullptr) return NullArg("lfmvox_model_is_special_token: argument");
    *special = model->model->IsSpecialToken(id) ? 1 : 0;
    return Status::Ok();
  });
}

// ---------------------------------------------------------------------------
// Conversations.

void lfmvox_conversation_options_init(lfmvox_conversation_options* options) {
  if (options == nullptr) return;
  const lfmvox::ConversationOptions d;
  options->engine = nullptr;
  options->threads = d.threads;
  options->context = d.context;
  options->seed = d.seed;
  options->max_clip_seconds = d.max_clip_seconds;
  options->context_policy = LFMVOX_CONTEXT_STOP;
  options->context_reserve = d.context_reserve;
}

int lfmvox_conversation_create(const lfmvox_model* model, const lfmvox_conversation_options* options,
                               lfmvox_conversation** out) {
  return Guard([&]() -> Status {
    if (out == nullptr) return NullArg("lfmvox_conversation_create: out");
    *out = nullptr;
    if (model == nullptr) return NullArg("lfmvox_conversation_create: model");
    lfmvox::ConversationOptions o;
    if (options != nullptr) {
      if (options->engine != nullptr) o.engine = options->engine->engine;
      o.threads = options->threads;
      o.context = options->context;
      o.seed = options->seed;
      o.max_clip_seconds = options->max_clip_seconds;
      if (options->context_policy != LFMVOX_CONTEXT_STOP &&
          options->context_policy != LFMVOX_CONTEXT_DROP_OLDEST) {
        return lfmvox::InvalidArgument(
            "context_policy must be LFMVOX_CONTEXT_STOP or LFMVOX_CONTEXT_DROP_OLDEST");
      }
      o.context_policy = options->context_policy == LFMVOX_CONTEXT_DROP_OLDEST
                             ? lfmvox::ContextPolicy::kDropOldest
                             : lfmvox::ContextPolicy::kStop;
      o.context_reserve = options->context_reserve;
    }
    auto c = lfmvox::Conversation::Create(model->model, o);
    if (!c.ok()) return c.status();
    auto h = std::make_unique<lfmvox_conversation>();
    h->conv = std::move(c).value();
    *out = h.release();
    return Status::Ok();
  });
}

void lfmvox_conversation_free(lfmvox_conversation* conversation) { delete conversation; }

int lfmvox_engine_create(int threads, size_t max_batch, lfmvox_engine** out) {
  return Guard([&]() -> Status {
    if (out == nullptr) return NullArg("lfmvox_engine_create: out");
    *out = nullptr;
    auto e = lfmvox::Engine::Create({.threads = threads, .max_batch = max_batch});
    if (!e.ok()) return e.status();
    auto h = std::make_unique<lfmvox_engine>();
    h->engine = std::move(e).value();
    *out = h.release();
    return Status::Ok();
  });
}

void lfmvox_engine_free(lfmvox_engine* engine) { delete engine; }

int lfmvox_conversation_cancel(lfmvox_conversation* c) {
  return Guard([&]() -> Status {
    if (c == nullptr) return NullArg("lfmvox_conversation_cancel: handle");
    c->conv->Cancel();
    return Status::Ok();
  });
}

int lfmvox_conversation_truncate_speech(lfmvox_conversation* c, size_t samples) {
  return Guard([&]() -> Status {
    if (c == nullptr) return NullArg("lfmvox_conversation_truncate_speech: handle");
    return c->conv->TruncateSpeech(samples);
  });
}

// The body of a conversation call: a NULL handle is an error naming the call.
#define LFMVOX_CONV_CALL(name, expr)                   \
  Guard([&]() -> Status {                              \
    if (c == nullptr) return NullArg(name ": handle"); \
    return (expr);                                     \
  })

int lfmvox_conversation_begin(lfmvox_conversation* c) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_begin", c->conv->Begin());
}

int lfmvox_conversation_start_turn(lfmvox_conversation* c, const char* role) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_start_turn",
                          role ? c->conv->StartTurn(role) : NullArg("lfmvox_conversation_start_turn: role"));
}

int lfmvox_conversation_add_text(lfmvox_conversation* c, const char* utf8, size_t length) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_add_text",
                          (utf8 || length == 0) ? c->conv->AddText(std::string_view(utf8 ? utf8 : "", length))
                                                : NullArg("lfmvox_conversation_add_text: utf8"));
}

int lfmvox_conversation_add_tokens(lfmvox_conversation* c, const int32_t* ids, size_t count) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_add_tokens",
                          (ids || count == 0) ? c->conv->AddTokens({ids, count})
                                              : NullArg("lfmvox_conversation_add_tokens: ids"));
}

int lfmvox_conversation_add_audio_out(lfmvox_conversation* c, const int32_t* codes, size_t frames) {
  return Guard([&]() -> Status {
    if (c == nullptr) return NullArg("lfmvox_conversation_add_audio_out: handle");
    if (codes == nullptr && frames != 0) return NullArg("lfmvox_conversation_add_audio_out: codes");
    const size_t C = static_cast<size_t>(c->conv->model().num_codebooks());
    return c->conv->AddAudioOut({codes, frames * C});
  });
}

int lfmvox_conversation_add_audio_file(lfmvox_conversation* c, const char* path) {
  return LFMVOX_CONV_CALL(
      "lfmvox_conversation_add_audio_file",
      path ? c->conv->AddAudioFile(path) : NullArg("lfmvox_conversation_add_audio_file: path"));
}

int lfmvox_conversation_add_audio(lfmvox_conversation* c, const float* samples, size_t count, int sample_rate,
                                  int channels) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_add_audio",
                          samples ? c->conv->AddAudio({samples, count}, sample_rate, channels)
                                  : NullArg("lfmvox_conversation_add_audio: samples"));
}

int lfmvox_conversation_end_turn(lfmvox_conversation* c) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_end_turn", c->conv->EndTurn());
}

int lfmvox_conversation_prefill(lfmvox_conversation* c) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_prefill", c->conv->Prefill());
}

int lfmvox_conversation_start_speech(lfmvox_conversation* c, const char* voice, const char* text) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_start_speech",
                          (voice && text) ? c->conv->StartSpeech(voice, text)
                                          : NullArg("lfmvox_conversation_start_speech: voice or text"));
}

int lfmvox_conversation_start_asr(lfmvox_conversation* c) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_start_asr", c->conv->StartAsr());
}

int lfmvox_conversation_start_chat(lfmvox_conversation* c, const char* system) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_start_chat", c->conv->StartChat(View(system)));
}

int lfmvox_conversation_add_prompt_json(lfmvox_conversation* c, const char* json, const char* base_dir) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_add_prompt_json",
                          json ? c->conv->AddPromptJson(json, base_dir ? base_dir : ".")
                               : NullArg("lfmvox_conversation_add_prompt_json: json"));
}

int lfmvox_conversation_add_prompt_file(lfmvox_conversation* c, const char* path) {
  return LFMVOX_CONV_CALL(
      "lfmvox_conversation_add_prompt_file",
      path ? c->conv->AddPromptFile(path) : NullArg("lfmvox_conversation_add_prompt_file: path"));
}

int lfmvox_conversation_reset(lfmvox_conversation* c) {
  return LFMVOX_CONV_CALL("lfmvox_conversation_reset", (c->conv->Reset(), c->words.clear(), Status::Ok()));
}

#undef LFMVOX_CONV_CALL

int lfmvox_conversation_context_stats(const lfmvox_conversation* c, size_t* positions, size_t* state_bytes,
                                      uint64_t* dropped_turns) {
  return Guard([&]() -> Status {
    if (c == nullptr) return NullArg("lfmvox_conversation_context_stats: c");
    const lfmvox::ContextStats s = c->conv->context_stats();
    if (positions) *positions = s.positions;
    if (state_bytes) *state_bytes = s.state_bytes;
    if (dropped_turns) *dropped_turns = s.dropped_turns;
    return Status::Ok();
  });
}

int lfmvox_generate_options_preset(const lfmvox_model* model, int preset, lfmvox_generate_options* out) {
  return Guard([&]() -> Status {
    if (model == nullptr || out == nullptr) return NullArg("lfmvox_generate_options_preset: model or out");
    const lfmvox::AudioModel& m = *model->model;
    switch (preset) {
      case LFMVOX_PRESET_TTS:
        ToC(lfmvox::GenerateOptions::ForTts(m), out);
        return Status::Ok();
      case LFMVOX_PRESET_SPEECH_TO_SPEECH:
        ToC(lfmvox::GenerateOptions::ForSpeechToSpeech(m), out);
        return Status::Ok();
      case LFMVOX_PRESET_ASR:
        ToC(lfmvox::GenerateOptions::ForAsr(m), out);
        return Status::Ok();
    }
    return lfmvox::InvalidArgument("unknown preset " + std::to_string(preset) +
                                   " (LFMVOX_PRESET_TTS, _SPEECH_TO_SPEECH or _ASR)");
  });
}

int lfmvox_conversation_generate(lfmvox_conversation* c, const lfmvox_generate_options* options,
                                 const lfmvox_callbacks* callbacks, lfmvox_generate_summary* summary) {
  if (summary != nullptr) *summary = lfmvox_generate_summary{};
  return Guard([&]() -> Status {
    if (c == nullptr) return NullArg("lfmvox_conversation_generate: handle");
    lfmvox::GenerateOptions o;
    if (options != nullptr) {
      if (options->mode != LFMVOX_MODE_SEQUENTIAL && options->mode != LFMVOX_MODE_INTERLEAVED) {
        return lfmvox::InvalidArgument("unknown mode " + std::to_string(options->mode) +
                                       " (LFMVOX_MODE_SEQUENTIAL or LFMVOX_MODE_INTERLEAVED)");
      }
      o = ToCpp(*options);
    }
    // Counted here too, so a cancelled run still reports what it delivered.
    lfmvox_generate_summary counted{};
    bool cancelled = false;
    const lfmvox_callbacks cb = callbacks ? *callbacks : lfmvox_callbacks{};
    lfmvox::OutputCallbacks out;
    out.on_text = [&](int32_t id, std::string_view piece) {
      ++counted.text_tokens;
      return cb.on_text
                 ? FromCallback(cb.on_text(cb.user, id, piece.data(), piece.size()), "on_text", &cancelled)
                 : Status::Ok();
    };
    out.on_audio_frame = [&](std::span<const int32_t> codes, bool end) {
      ++counted.audio_frames;
      return cb.on_audio_frame
                 ? FromCallback(cb.on_audio_frame(cb.user, codes.data(), codes.size(), end ? 1 : 0),
                                "on_audio_frame", &cancelled)
                 : Status::Ok();
    };
    if (cb.on_pcm) {
      out.on_pcm = [&](std::span<const float> pcm) {
        counted.pcm_samples += pcm.size();
        return FromCallback(cb.on_pcm(cb.user, pcm.data(), pcm.size()), "on_pcm", &cancelled);
      };
    }
    o.word_timestamps = c->word_timestamps;
    c->words.clear();
    auto r = c->conv->Generate(o, out);
    if (r.ok()) c->words = r->words;
    if (summary != nullptr) {
      if (r.ok()) {
        summary->text_tokens = r->text_tokens;
        summary->audio_frames = r->audio_frames;
        summary->pcm_samples = r->pcm_samples;
        summary->ended = r->ended ? 1 : 0;
        summary->context_full = r->context_full ? 1 : 0;
      } else {
        *summary = counted;
        summary->cancelled = cancelled ? 1 : 0;
      }
    }
    return r.status();
  });
}

int lfmvox_conversation_set_word_timestamps(lfmvox_conversation* c, int on) {
  return Guard([&]() -> Status {
    if (c == nullptr) return NullArg("lfmvox_conversation_set_word_timestamps: handle");
    c->word_timestamps = on != 0;
    return Status::Ok();
  });
}

int lfmvox_conversation_word_count(const lfmvox_conversation* c, size_t* count) {
  return Guard([&]() -> Status {
    if (c == nullptr || count == nullptr) return NullArg("lfmvox_conversation_word_count: handle or count");
    *count = c->words.size();
    return Status::Ok();
  });
}

int lfmvox_conversation_word(const lfmvox_conversation* c, size_t i, const char** text, size_t* len,
                             double* start, double* end) {
  return Guard([&]() -> Status {
    if (c == nullptr) return NullArg("lfmvox_conversation_word: handle");
    if (i >= c->words.size()) {
      return lfmvox::OutOfRange("word " + std::to_string(i) + " of " + std::to_string(c->words.size()));
    }
    const lfmvox::WordTiming& w = c->words[i];
    if (text != nullptr) *text = w.text.data();
    if (len != nullptr) *len = w.text.size();
    if (start != nullptr) *start = w.start;
    if (end != nullptr) *end = w.end;
    return Status::Ok();
  });
}

// ---------------------------------------------------------------------------
// Detokenizer.

int lfmvox_detokenizer_load(const char* dir, lfmvox_detokenizer** out) {
  return Guard([&]() -> Status {
    if (out == nullptr) return NullArg("lfmvox_detokenizer_load: out");
    *out = nullptr;
    if (dir == nullptr) return NullArg("lfmvox_detokenizer_load: dir");
    auto m = lfmvox::DetokenizerModel::Load(dir);
    if (!m.ok()) return m.status();
    auto h = std::make_unique<lfmvox_detokenizer>();
    h->model = std::move(m).value();
    *out = h.release();
    return Status::Ok();
  });
}

void lfmvox_detokenizer_free(lfmvox_detokenizer* detokenizer) { delete detokenizer; }

int lfmvox_detokenizer_get_info(const lfmvox_detokenizer* detokenizer, lfmvox_detokenizer_info* out) {
  return Guard([&]() -> Status {
    if (detokenizer == nullptr || out == nullptr) return NullArg("lfmvox_detokenizer_get_info: argument");
    const lfmvox::DetokenizerModel& m = *detokenizer->model;
    out->sample_rate = m.sample_rate();
    out->num_codebooks = m.num_codebooks();
    out->codebook_size = m.codebook_size();
    out->samples_per_frame = m.samples_per_frame();
    out->tail_samples = m.tail_samples();
    return Status::Ok();
  });
}

int lfmvox_detok_stream_create(const lfmvox_detokenizer* detokenizer, int threads, size_t max_frames_per_call,
                               lfmvox_detok_stream** out) {
  return Guard([&]() -> Status {
    if (out == nullptr) return NullArg("lfmvox_detok_stream_create: out");
    *out = nullptr;
    if (detokenizer == nullptr) return NullArg("lfmvox_detok_stream_create: detokenizer");
    auto s = lfmvox::DetokenizerStream::Create(
        detokenizer->model,
        {.threads = threads, .max_frames_per_call = max_frames_per_call, .engine = nullptr});
    if (!s.ok()) return s.status();
    auto h = std::make_unique<lfmvox_detok_stream>();
    h->stream = std::move(s).value();
    *out = h.release();
    return Status::Ok();
  });
}

void lfmvox_detok_stream_free(lfmvox_detok_stream* stream) { delete stream; }

int lfmvox_detok_stream_push(lfmvox_detok_stream* stream, const int32_t* codes, size_t frames, float* pcm,
                             size_t capacity, size_t* written) {
  return Guard([&]() -> Status {
    if (stream == nullptr || written == nullptr)
      return NullArg("lfmvox_detok_stream_push: stream or written");
    *written = 0;
    if ((codes == nullptr && frames != 0) || (pcm == nullptr && capacity != 0)) {
      return NullArg("lfmvox_detok_stream_push: codes or pcm");
    }
    const size_t C = static_cast<size_t>(stream->stream->model().num_codebooks());
    auto n = stream->stream->Push({codes, frames * C}, {pcm, capacity});
    if (!n.ok()) return n.status();
    *written = *n;
    return Status::Ok();
  });
}

int lfmvox_detok_stream_flush(lfmvox_detok_stream* stream, float* pcm, size_t capacity, size_t* written) {
  return Guard([&]() -> Status {
    if (stream == nullptr || written == nullptr)
      return NullArg("lfmvox_detok_stream_flush: stream or written");
    *written = 0;
    if (pcm == nullptr && capacity != 0) return NullArg("lfmvox_detok_stream_flush: pcm");
    auto n = stream->stream->Flush({pcm, capacity});
    if (!n.ok()) return n.status();
    *written = *n;
    return Status::Ok();
  });
}

int lfmvox_detok_stream_reset(lfmvox_detok_stream* stream) {
  return Guard([&]() -> Status {
    if (stream == nullptr) return NullArg("lfmvox_detok_stream_reset: stream");
    stream->stream->Reset();
    return Status::Ok();
  });
}

}  // extern "C"

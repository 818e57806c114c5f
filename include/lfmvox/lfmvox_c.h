/* lfmvox C API: the library behind opaque handles, for servers and other
 * languages (C11 or C++; no C++ type or exception crosses it).
 *
 * Errors: every call returns an int status, LFMVOX_OK (0) on success and one
 * of the lfmvox_status codes otherwise. The message of the calling thread's
 * last failed call is lfmvox_last_error() (thread-local; it stays until the
 * thread's next failure). A NULL handle or output pointer is
 * LFMVOX_INVALID_ARGUMENT, never a crash; freeing NULL is a no-op.
 *
 * Thread safety, per handle:
 *   lfmvox_model, lfmvox_detokenizer: immutable once loaded; any number of
 *     threads may use one at the same time (create conversations or streams,
 *     query it). Streams keep their model alive: a model may be freed
 *     before the conversations and streams made from it.
 *   lfmvox_conversation, lfmvox_detok_stream: one thread at a time (calls on
 *     one handle must not overlap). Different handles run concurrently.
 *
 * Strings are UTF-8. Pointers the library hands out (voice names, error
 * messages) stay valid as documented at each call.
 */
#ifndef LFMVOX_LFMVOX_C_H_
#define LFMVOX_LFMVOX_C_H_

#include <stddef.h>
#include <stdint.h>

#include "lfmvox/version.h"
#include "lfmvox/visibility.h"

LFMVOX_API_BEGIN
#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (the C++ StatusCode values, plus allocation failure). */
typedef enum lfmvox_status {
  LFMVOX_OK = 0,
  LFMVOX_INVALID_ARGUMENT = 1, /* the caller passed something malformed */
  LFMVOX_NOT_FOUND = 2,        /* a file, tensor or key is missing */
  LFMVOX_DATA_LOSS = 3,        /* a file is truncated or corrupt */
  LFMVOX_OUT_OF_RANGE = 4,     /* a length, index or size beyond what is allowed */
  LFMVOX_UNIMPLEMENTED = 5,    /* valid input this build does not support */
  LFMVOX_INTERNAL = 6,         /* a broken invariant inside lfmvox (a bug) */
  LFMVOX_IO = 7,               /* the operating system refused (open, mmap, write) */
  LFMVOX_CANCELLED = 8,        /* a callback returned non-zero and stopped generation */
  LFMVOX_NO_MEMORY = 9         /* an allocation failed */
} lfmvox_status;

/* The calling thread's last error message ("" if none yet). Valid until the
 * thread's next failing lfmvox call. */
const char* lfmvox_last_error(void);
/* A short name of a status code ("ok", "not found", ...); static storage. */
const char* lfmvox_status_name(int status);
/* The version of the library linked ("MAJOR.MINOR.PATCH"; static storage). LFMVOX_VERSION_STRING
 * (lfmvox/version.h) is that of the headers compiled against. */
const char* lfmvox_version(void);

/* ------------------------------------------------------------------------
 * Speech and text models (LFM2.5-Audio or LFM3-Audio; the family is chosen from the
 * files). */

typedef struct lfmvox_model lfmvox_model;
typedef struct lfmvox_conversation lfmvox_conversation;

/* `dir`: the model directory as downloaded (config.json, model.safetensors
 * or its index, tokenizer.json, audio_detokenizer/). *out is set on success
 * and NULL otherwise. */
int lfmvox_model_load(const char* dir, lfmvox_model** out);
void lfmvox_model_free(lfmvox_model* model);

typedef struct lfmvox_model_info {
  const char* family;    /* "LFM2.5-Audio", "LFM2-Audio" or "LFM3-Audio"; valid while the model lives */
  int sample_rate;       /* of the speech produced (24000) */
  int num_codebooks;     /* audio codes per frame (8) */
  int audio_vocab;       /* valid audio codes are [0, audio_vocab), end-of-audio included */
  int samples_per_frame; /* PCM samples one audio frame decodes to (1920) */
} lfmvox_model_info;
int lfmvox_model_get_info(const lfmvox_model* model, lfmvox_model_info* out);

/* The voices lfmvox_conversation_start_speech takes: *voices is an array of
 * *count NUL-terminated names, valid while the model lives. */
int lfmvox_model_voices(const lfmvox_model* model, const char* const** voices, size_t* count);
/* What the loaded files allow (AudioModel::CanListen / CanSpeak): LFMVOX_OK, or the error a call that
 * needs the missing part would return (lfmvox_last_error names the file to add; a GGUF set without its
 * mmproj does not listen, one without its vocoder does not speak). */
int lfmvox_model_can_listen(const lfmvox_model* model);
int lfmvox_model_can_speak(const lfmvox_model* model);
/* The system prompt lfmvox_conversation_start_chat uses for NULL; valid while the model lives. */
int lfmvox_model_default_system_prompt(const lfmvox_model* model, const char** prompt);

/* The text of token `id` (special tokens included), snprintf-style: writes at
 * most `capacity` bytes including a terminating NUL into `buf` (which may be
 * NULL when capacity is 0) and sets *length to the full text's length. */
int lfmvox_model_token_text(const lfmvox_model* model, int32_t id, char* buf, size_t capacity,
                            size_t* length);
/* *special = 1 when `id` is a control token a transcript leaves out. */
int lfmvox_model_is_special_token(const lfmvox_model* model, int32_t id, int* special);

/* The engine: one thread pool shared by every conversation and stream
 * created on it; their steps run one at a time and are batched. Thread-safe. */
typedef struct lfmvox_engine lfmvox_engine;
int lfmvox_engine_create(int threads, size_t max_batch, lfmvox_engine** out);
/* Conversations and streams keep their engine alive; freeing the handle early is fine. */
void lfmvox_engine_free(lfmvox_engine* engine);

typedef struct lfmvox_conversation_options {
  lfmvox_engine* engine;   /* the engine to run on; NULL: a private one of `threads` (default NULL) */
  int threads;             /* without an engine: its private pool, caller included (default 1) */
  size_t context;          /* positions kept: text tokens, audio frames in and out (default 4096) */
  uint64_t seed;           /* sampling seed (default 0) */
  double max_clip_seconds; /* the longest clip one add_audio call takes (default 60) */
  int context_policy;      /* when the context fills: LFMVOX_CONTEXT_STOP (default) or
                              LFMVOX_CONTEXT_DROP_OLDEST (lfmvox::ContextPolicy in lfmvox.h) */
  size_t context_reserve;  /* drop_oldest: positions kept free at each turn (default 0: half the context) */
} lfmvox_conversation_options;
enum { LFMVOX_CONTEXT_STOP = 0, LFMVOX_CONTEXT_DROP_OLDEST = 1 };
/* Fills the defaults. */
void lfmvox_conversation_options_init(lfmvox_conversation_options* options);

/* options may be NULL (the defaults). */
int lfmvox_conversation_create(const lfmvox_model* model, const lfmvox_conversation_options* options,
                               lfmvox_conversation** out);
void lfmvox_conversation_free(lfmvox_conversation* conversation);
/* Thread-safe: a running generate stops at its next item (summary.cancelled),
 * a running add_audio or prefill with LFMVOX_CANCELLED. */
int lfmvox_conversation_cancel(lfmvox_conversation* c);
/* Runs the backbone now over what was added since the last generate or
 * prefill (all but the last position), so the next generate starts sooner;
 * for a live conversation, while waiting for the user. The next generate's
 * output is the same either way (Conversation::Prefill in lfmvox.h). */
int lfmvox_conversation_prefill(lfmvox_conversation* c);
/* Barge-in: keeps the first `samples` PCM samples' worth (whole 80 ms frames,
 * rounded up) of the last generate's speech and drops what followed. */
int lfmvox_conversation_truncate_speech(lfmvox_conversation* c, size_t samples);

/* Prompt pieces, as the official ChatState builds them. */
int lfmvox_conversation_begin(lfmvox_conversation* c);                        /* <|startoftext|> */
int lfmvox_conversation_start_turn(lfmvox_conversation* c, const char* role); /* <|im_start|>role\n */
int lfmvox_conversation_add_text(lfmvox_conversation* c, const char* utf8, size_t length);
int lfmvox_conversation_add_tokens(lfmvox_conversation* c, const int32_t* ids, size_t count);
/* codes: frame-major [frames, num_codebooks]. */
int lfmvox_conversation_add_audio_out(lfmvox_conversation* c, const int32_t* codes, size_t frames);
int lfmvox_conversation_add_audio_file(lfmvox_conversation* c, const char* path);
/* samples: interleaved [frames, channels] floats at sample_rate; `count` is frames·channels. */
int lfmvox_conversation_add_audio(lfmvox_conversation* c, const float* samples, size_t count, int sample_rate,
                                  int channels);
int lfmvox_conversation_end_turn(lfmvox_conversation* c); /* <|im_end|>\n */
/* Whole prompts (see Conversation in lfmvox.h): TTS of `text` in `voice`
 * (one of lfmvox_model_voices), ending with the assistant's turn opening; */
int lfmvox_conversation_start_speech(lfmvox_conversation* c, const char* voice, const char* text);
/* the ASR system turn and the user's turn opening (then add the audio,
 * end_turn, start_turn("assistant")); */
int lfmvox_conversation_start_asr(lfmvox_conversation* c);
/* a closed system turn holding `system` (NULL or "": the model's default). */
int lfmvox_conversation_start_chat(lfmvox_conversation* c, const char* system);
/* A JSON prompt: [{"text": ".."}, {"ids": [..]}, {"audio_out": [[8 codes], ..]},
 * {"audio": "file"}]; relative audio paths are taken from base_dir (NULL: "."),
 * or from the prompt file's folder. */
int lfmvox_conversation_add_prompt_json(lfmvox_conversation* c, const char* json, const char* base_dir);
int lfmvox_conversation_add_prompt_file(lfmvox_conversation* c, const char* path);
/* A new, empty conversation. */
int lfmvox_conversation_reset(lfmvox_conversation* c);
/* How much of its context the conversation holds (lfmvox::ContextStats); any out pointer may be NULL. */
int lfmvox_conversation_context_stats(const lfmvox_conversation* c, size_t* positions, size_t* state_bytes,
                                      uint64_t* dropped_turns);

typedef enum lfmvox_mode {
  LFMVOX_MODE_SEQUENTIAL = 0, /* ASR, TTS, text chat */
  LFMVOX_MODE_INTERLEAVED = 1 /* speech-to-speech */
} lfmvox_mode;

typedef enum lfmvox_preset {
  LFMVOX_PRESET_TTS = 0,              /* sequential; audio 0.8 / top-k 64 (LFM2.5) */
  LFMVOX_PRESET_SPEECH_TO_SPEECH = 1, /* interleaved; audio 1.0 / top-k 4 */
  LFMVOX_PRESET_ASR = 2               /* sequential, greedy */
} lfmvox_preset;

/* temperature <= 0 or top_k == 1: greedy; top_k 0: no cut. */
typedef struct lfmvox_generate_options {
  int mode;           /* lfmvox_mode */
  int max_new_tokens; /* text tokens and audio frames together */
  float text_temperature;
  int text_top_k;
  float audio_temperature;
  int audio_top_k;
} lfmvox_generate_options;
/* The model family's official settings for a task. */
int lfmvox_generate_options_preset(const lfmvox_model* model, int preset, lfmvox_generate_options* out);

/* Streaming output; any callback may be NULL. A non-zero return stops
 * generation: generate then returns LFMVOX_CANCELLED (the items delivered so
 * far are in the history and counted in the summary). Pointers passed in
 * are valid only during the call. */
typedef struct lfmvox_callbacks {
  void* user;
  /* A text token and the UTF-8 text it completes (len may be 0 while a
   * multi-byte character is incomplete; piece is not NUL-terminated). */
  int (*on_text)(void* user, int32_t id, const char* piece, size_t len);
  /* An audio frame's num_codebooks codes; end_of_audio = 1 on the frame that closes speech. */
  int (*on_audio_frame)(void* user, const int32_t* codes, size_t n, int end_of_audio);
  /* Speech as it is decoded (model sample rate, mono), chunks of up to one frame. */
  int (*on_pcm)(void* user, const float* pcm, size_t n);
} lfmvox_callbacks;

typedef struct lfmvox_generate_summary {
  int text_tokens;
  int audio_frames; /* end-of-audio frames included */
  size_t pcm_samples;
  int ended;        /* the model closed its turn */
  int context_full; /* stopped for lack of context */
  int cancelled;    /* a callback stopped it */
} lfmvox_generate_summary;

/* Generates the assistant's output from the history (normally ending with
 * the assistant's turn opening); every item is appended to the history.
 * options NULL: sequential greedy, 512 items. callbacks and summary may be NULL. */
int lfmvox_conversation_generate(lfmvox_conversation* c, const lfmvox_generate_options* options,
                                 const lfmvox_callbacks* callbacks, lfmvox_generate_summary* summary);

/* Word timestamps (lfmvox::GenerateOptions::word_timestamps: approximate, from the model's attention onto
 * the last audio clip added; see lfmvox.h): on != 0 makes the conversation's next generations record them
 * (a generation without speech added before it then fails with LFMVOX_INVALID_ARGUMENT). */
int lfmvox_conversation_set_word_timestamps(lfmvox_conversation* c, int on);
/* The last generation's words, in order: their count, and word i's UTF-8 text (not NUL-terminated; valid
 * until the next generate, reset or free) and its start and end in seconds from the clip's start. Any out
 * pointer of lfmvox_conversation_word may be NULL; i >= count is LFMVOX_OUT_OF_RANGE. */
int lfmvox_conversation_word_count(const lfmvox_conversation* c, size_t* count);
int lfmvox_conversation_word(const lfmvox_conversation* c, size_t i, const char** text, size_t* len,
                             double* start, double* end);

/* ------------------------------------------------------------------------
 * The detokenizer alone: audio codes -> PCM. */

typedef struct lfmvox_detokenizer lfmvox_detokenizer;
typedef struct lfmvox_detok_stream lfmvox_detok_stream;

/* `dir`: the model directory (holding audio_detokenizer/) or that folder itself. */
int lfmvox_detokenizer_load(const char* dir, lfmvox_detokenizer** out);
void lfmvox_detokenizer_free(lfmvox_detokenizer* detokenizer);

typedef struct lfmvox_detokenizer_info {
  int sample_rate;
  int num_codebooks;     /* codes per frame */
  int codebook_size;     /* valid codes are [0, codebook_size) */
  int samples_per_frame; /* 1920 = 80 ms */
  int tail_samples;      /* what flush emits at the end of a stream */
} lfmvox_detokenizer_info;
int lfmvox_detokenizer_get_info(const lfmvox_detokenizer* detokenizer, lfmvox_detokenizer_info* out);

/* threads >= 1; max_frames_per_call: frames one push decodes in a single pass (>= 1). */
int lfmvox_detok_stream_create(const lfmvox_detokenizer* detokenizer, int threads, size_t max_frames_per_call,
                               lfmvox_detok_stream** out);
void lfmvox_detok_stream_free(lfmvox_detok_stream* stream);
/* codes: frame-major [frames, num_codebooks]; pcm holds `capacity` floats
 * (frames·samples_per_frame suffice). *written: the samples that became
 * final (the first push of a stream yields tail_samples fewer). */
int lfmvox_detok_stream_push(lfmvox_detok_stream* stream, const int32_t* codes, size_t frames, float* pcm,
                             size_t capacity, size_t* written);
/* The last tail_samples samples; ends the stream. */
int lfmvox_detok_stream_flush(lfmvox_detok_stream* stream, float* pcm, size_t capacity, size_t* written);
/* Starts a new stream, as if freshly created. */
int lfmvox_detok_stream_reset(lfmvox_detok_stream* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif
LFMVOX_API_END

#endif /* LFMVOX_LFMVOX_C_H_ */

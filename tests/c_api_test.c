/* The C API (include/lfmvox/lfmvox_c.h), compiled as C11, against the oracle
 * traces (tests/data/README.md):
 *   - "transcribe": the synthetic audio prompt (lfm25_tiny prefill__text_ids
 *     and prefill__modality_flag, the AUDIO_IN run from inputs/synthetic_16k.wav)
 *     generated greedily, sequential, 16 items = gen__sequential.npy exactly;
 *   - "speak": tts__text_ids generated greedily, 24 items = tts__sequential.npy
 *     exactly, with the speech decoded: every real frame gives
 *     samples_per_frame samples in all (the first chunk tail_samples fewer,
 *     the flush at end-of-audio the tail), all finite;
 *   - the detokenizer stream on detok__T7 (codes -> pcm within 1e-4 of scale);
 *   - presets, cancellation, and error paths with their messages.
 * Exits non-zero on any failed check. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lfmvox/lfmvox_c.h"

static int failures = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      ++failures;                                                              \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
    }                                                                          \
  } while (0)

/* Fatal: the rest of the case cannot run. */
#define REQUIRE_OK(call)                                                                  \
  do {                                                                                    \
    int rc_ = (call);                                                                     \
    if (rc_ != LFMVOX_OK) {                                                               \
      fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #call, rc_, \
              lfmvox_status_name(rc_), lfmvox_last_error());                              \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

/* ---------------------------------------------------------------------------
 * A minimal .npy reader: version 1/2, little-endian '<i8', '<i4' or '<f4',
 * C order. Values come back as doubles (exact for these traces' integers). */

typedef struct {
  size_t dims[4];
  int rank;
  size_t count;
  double* v;
} Npy;

static void Path(char* out, size_t cap, const char* rel) {
  snprintf(out, cap, "%s/%s", LFMVOX_TEST_DATA_DIR, rel);
}

static Npy LoadNpy(const char* rel) {
  char path[1024];
  Path(path, sizeof path, rel);
  Npy a = {{0}, 0, 0, NULL};
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(1);
  }
  unsigned char pre[12];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    fprintf(stderr, "%s is not a .npy file\n", path);
    exit(1);
  }
  size_t header_len = (size_t)pre[8] | ((size_t)pre[9] << 8);
  if (pre[6] >= 2) {
    if (fread(pre + 10, 1, 2, f) != 2) exit(1);
    header_len |= ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
  }
  char* header = calloc(header_len + 1, 1);
  if (!header || fread(header, 1, header_len, f) != header_len) exit(1);
  const char* d = strstr(header, "'descr': '");
  const char* s = strstr(header, "'shape': (");
  if (!d || !s || strstr(header, "'fortran_order': True")) {
    fprintf(stderr, "%s: unsupported header %s\n", path, header);
    exit(1);
  }
  d += strlen("'descr': '");
  size_t width = 0;
  int is_float = 0;
  if (strncmp(d, "<i8", 3) == 0) {
    width = 8;
  } else if (strncmp(d, "<i4", 3) == 0) {
    width = 4;
  } else if (strncmp(d, "<f4", 3) == 0) {
    width = 4;
    is_float = 1;
  } else {
    fprintf(stderr, "%s: unsupported dtype %.3s\n", path, d);
    exit(1);
  }
  s += strlen("'shape': (");
  a.count = 1;
  while (*s && *s != ')' && a.rank < 4) {
    char* end;
    unsigned long long n = strtoull(s, &end, 10);
    if (end == s) break;
    a.dims[a.rank++] = (size_t)n;
    a.count *= (size_t)n;
    s = end;
    while (*s == ',' || *s == ' ') ++s;
  }
  free(header);
  unsigned char* raw = malloc(a.count * width + 1);
  a.v = malloc((a.count + 1) * sizeof(double));
  if (!raw || !a.v || fread(raw, width, a.count, f) != a.count) {
    fprintf(stderr, "%s: truncated\n", path);
    exit(1);
  }
  fclose(f);
  for (size_t i = 0; i < a.count; ++i) {
    const unsigned char* p = raw + i * width;
    if (width == 8) {
      int64_t x;
      memcpy(&x, p, 8);
      a.v[i] = (double)x;
    } else if (is_float) {
      float x;
      memcpy(&x, p, 4);
      a.v[i] = x;
    } else {
      int32_t x;
      memcpy(&x, p, 4);
      a.v[i] = x;
    }
  }
  free(raw);
  return a;
}

/* ---------------------------------------------------------------------------
 * Generated items as trace rows: [0, id, -1 x 7] for text, [1, c0..c7] for audio. */

enum { kMaxRows = 64, kMaxChunks = 64 };

typedef struct {
  int64_t rows[kMaxRows][9];
  size_t n_rows;
  size_t chunk[kMaxChunks]; /* sizes of the PCM chunks, in order */
  size_t n_chunks;
  size_t samples;
  int nonfinite;
  int real_frames;       /* audio frames that are not end-of-audio */
  int cancel_after_text; /* > 0: on_text returns 1 once that many texts arrived */
  size_t texts;
} Recorder;

static int OnText(void* user, int32_t id, const char* piece, size_t len) {
  Recorder* r = user;
  (void)piece;
  (void)len;
  if (r->n_rows < kMaxRows) {
    int64_t* row = r->rows[r->n_rows++];
    row[0] = 0;
    row[1] = id;
    for (int k = 2; k < 9; ++k) row[k] = -1;
  }
  ++r->texts;
  return r->cancel_after_text > 0 && r->texts >= (size_t)r->cancel_after_text;
}

static int OnAudioFrame(void* user, const int32_t* codes, size_t n, int end_of_audio) {
  Recorder* r = user;
  if (!end_of_audio) ++r->real_frames;
  if (r->n_rows < kMaxRows && n == 8) {
    int64_t* row = r->rows[r->n_rows++];
    row[0] = 1;
    for (size_t k = 0; k < 8; ++k) row[1 + k] = codes[k];
  }
  return 0;
}

static int OnPcm(void* user, const float* pcm, size_t n) {
  Recorder* r = user;
  if (r->n_chunks < kMaxChunks) r->chunk[r->n_chunks++] = n;
  r->samples += n;
  for (size_t i = 0; i < n; ++i) r->nonfinite += !isfinite(pcm[i]);
  return 0;
}

static void ExpectRows(const Recorder* r, const Npy* want, const char* what) {
  CHECK(want->rank == 2 && want->dims[1] == 9, "%s: trace shape", what);
  CHECK(r->n_rows == want->dims[0], "%s: %zu items, the trace has %zu", what, r->n_rows, want->dims[0]);
  for (size_t i = 0; i < r->n_rows && i < want->dims[0]; ++i) {
    for (int k = 0; k < 9; ++k) {
      const int64_t w = (int64_t)want->v[i * 9 + (size_t)k];
      CHECK(r->rows[i][k] == w, "%s: item %zu column %d is %lld, the trace has %lld", what, i, k,
            (long long)r->rows[i][k], (long long)w);
    }
  }
}

static lfmvox_callbacks Callbacks(Recorder* r, int with_pcm) {
  lfmvox_callbacks cb = {r, OnText, OnAudioFrame, with_pcm ? OnPcm : NULL};
  return cb;
}

/* ---------------------------------------------------------------------------
 * Cases. */

static lfmvox_conversation* NewConversation(const lfmvox_model* m, int threads) {
  lfmvox_conversation_options o;
  lfmvox_conversation_options_init(&o);
  CHECK(o.threads == 1 && o.context == 4096 && o.seed == 0, "conversation defaults");
  o.threads = threads;
  o.context = 256;
  lfmvox_conversation* c = NULL;
  REQUIRE_OK(lfmvox_conversation_create(m, &o, &c));
  return c;
}

/* gen/sequential: the oracle's synthetic audio prompt, greedy, 16 items. */
static void Transcribe(const lfmvox_model* m) {
  Npy text = LoadNpy("lfm25_tiny/traces/prefill__text_ids.npy");
  Npy flags = LoadNpy("lfm25_tiny/traces/prefill__modality_flag.npy");
  Npy want = LoadNpy("lfm25_tiny/traces/gen__sequential.npy");
  char wav[1024];
  Path(wav, sizeof wav, "inputs/synthetic_16k.wav");
  lfmvox_conversation* c = NewConversation(m, 2);
  int32_t ids[256];
  size_t ti = 0, audio_runs = 0;
  for (size_t p = 0; p < flags.count;) {
    size_t q = p;
    while (q < flags.count && flags.v[q] == flags.v[p]) ++q;
    if (flags.v[p] == 1) {
      size_t n = 0;
      for (size_t i = p; i < q && n < 256; ++i) ids[n++] = (int32_t)text.v[ti++];
      REQUIRE_OK(lfmvox_conversation_add_tokens(c, ids, n));
    } else {
      REQUIRE_OK(lfmvox_conversation_add_audio_file(c, wav));
      ++audio_runs;
    }
    p = q;
  }
  CHECK(audio_runs == 1 && ti == text.count, "prompt: %zu audio runs, %zu of %zu ids", audio_runs, ti,
        text.count);
  lfmvox_generate_options o;
  REQUIRE_OK(lfmvox_generate_options_preset(m, LFMVOX_PRESET_ASR, &o));
  CHECK(o.mode == LFMVOX_MODE_SEQUENTIAL && o.text_temperature <= 0 && o.audio_temperature <= 0,
        "ASR preset: sequential and greedy (mode %d, T %g / %g)", o.mode, o.text_temperature,
        o.audio_temperature);
  o.max_new_tokens = 16;
  Recorder r;
  memset(&r, 0, sizeof r);
  lfmvox_callbacks cb = Callbacks(&r, 0);
  lfmvox_generate_summary s;
  REQUIRE_OK(lfmvox_conversation_generate(c, &o, &cb, &s));
  ExpectRows(&r, &want, "gen__sequential");
  CHECK(s.text_tokens + s.audio_frames == 16 && !s.ended && !s.cancelled, "summary %d + %d", s.text_tokens,
        s.audio_frames);
  CHECK(s.pcm_samples == 0, "no on_pcm, yet %zu samples", s.pcm_samples);

  /* Word timestamps of a continued turn, its text sampled near uniformly (the tiny model's greedy text
   * starts speech): each word in order, inside the clip's positions (1.3 s: 17 of 80 ms), the index past
   * the last refused. */
  size_t words = 99;
  REQUIRE_OK(lfmvox_conversation_word_count(c, &words));
  CHECK(words == 0, "words without word timestamps: %zu", words);
  REQUIRE_OK(lfmvox_conversation_set_word_timestamps(c, 1));
  o.text_temperature = 50;
  o.text_top_k = 0;
  REQUIRE_OK(lfmvox_conversation_generate(c, &o, NULL, NULL));
  REQUIRE_OK(lfmvox_conversation_word_count(c, &words));
  CHECK(words > 0, "no words from sampled text");
  double last = 0;
  for (size_t i = 0; i < words; ++i) {
    const char* t = NULL;
    size_t len = 0;
    double a = -1, b = -1;
    REQUIRE_OK(lfmvox_conversation_word(c, i, &t, &len, &a, &b));
    CHECK(t != NULL && len > 0 && a >= last && b >= a && b <= 17 * 0.08 + 1e-9, "word %zu: %.3f..%.3f", i, a,
          b);
    last = a;
  }
  CHECK(lfmvox_conversation_word(c, words, NULL, NULL, NULL, NULL) == LFMVOX_OUT_OF_RANGE,
        "word past the last accepted");

  lfmvox_conversation_free(c);
  free(text.v);
  free(flags.v);
  free(want.v);
}

/* tts/sequential with speech decoded. */
static void Speak(const lfmvox_model* m, const lfmvox_model_info* info,
                  const lfmvox_detokenizer_info* dinfo) {
  Npy prompt = LoadNpy("lfm25_tiny/traces/tts__text_ids.npy");
  Npy want = LoadNpy("lfm25_tiny/traces/tts__sequential.npy");
  int32_t ids[256];
  for (size_t i = 0; i < prompt.count && i < 256; ++i) ids[i] = (int32_t)prompt.v[i];
  lfmvox_conversation* c = NewConversation(m, 1);
  REQUIRE_OK(lfmvox_conversation_add_tokens(c, ids, prompt.count));
  /* The prompt run ahead of the generation, as a live conversation does while waiting: the rows below
   * are still the trace's. */
  REQUIRE_OK(lfmvox_conversation_prefill(c));
  CHECK(lfmvox_conversation_prefill(NULL) == LFMVOX_INVALID_ARGUMENT, "prefill of a null handle");
  lfmvox_generate_options o;
  REQUIRE_OK(lfmvox_generate_options_preset(m, LFMVOX_PRESET_TTS, &o));
  CHECK(o.mode == LFMVOX_MODE_SEQUENTIAL && fabsf(o.audio_temperature - 0.8f) < 1e-6f &&
            o.audio_top_k == 64 && o.text_temperature <= 0,
        "TTS preset: mode %d, audio %g / %d", o.mode, o.audio_temperature, o.audio_top_k);
  o.audio_temperature = 0; /* the trace is greedy */
  o.max_new_tokens = 24;
  Recorder r;
  memset(&r, 0, sizeof r);
  lfmvox_callbacks cb = Callbacks(&r, 1);
  lfmvox_generate_summary s;
  REQUIRE_OK(lfmvox_conversation_generate(c, &o, &cb, &s));
  ExpectRows(&r, &want, "tts__sequential");
  /* The trace speaks 3 real frames, then end-of-audio. */
  CHECK(r.real_frames == 3, "%d real frames", r.real_frames);
  const size_t spf = (size_t)info->samples_per_frame, tail = (size_t)dinfo->tail_samples;
  CHECK(spf == 1920 && tail > 0 && tail < spf, "samples_per_frame %zu, tail %zu", spf, tail);
  CHECK(r.samples == (size_t)r.real_frames * spf, "%zu samples for %d frames", r.samples, r.real_frames);
  CHECK(s.pcm_samples == r.samples, "summary %zu samples, callbacks %zu", s.pcm_samples, r.samples);
  CHECK(r.n_chunks == 4, "%zu chunks", r.n_chunks);
  if (r.n_chunks == 4) {
    CHECK(r.chunk[0] == spf - tail && r.chunk[1] == spf && r.chunk[2] == spf && r.chunk[3] == tail,
          "chunks %zu %zu %zu %zu", r.chunk[0], r.chunk[1], r.chunk[2], r.chunk[3]);
  }
  CHECK(r.nonfinite == 0, "%d non-finite samples", r.nonfinite);
  CHECK(s.audio_frames == 4 && s.text_tokens == 20, "summary %d frames, %d texts", s.audio_frames,
        s.text_tokens);

  /* Cancellation: on_text says stop at the first text token (item 0 of the
   * trace, before any speech); the rest of the run does not happen. */
  REQUIRE_OK(lfmvox_conversation_reset(c));
  REQUIRE_OK(lfmvox_conversation_add_tokens(c, ids, prompt.count));
  memset(&r, 0, sizeof r);
  r.cancel_after_text = 1;
  cb = Callbacks(&r, 1);
  const int rc = lfmvox_conversation_generate(c, &o, &cb, &s);
  CHECK(rc == LFMVOX_CANCELLED, "a stopping callback gives %d", rc);
  CHECK(s.cancelled == 1 && s.text_tokens == 1 && s.audio_frames == 0 && r.n_rows == 1 && r.rows[0][1] == 128,
        "cancelled: summary %d %d %d, %zu items", s.cancelled, s.text_tokens, s.audio_frames, r.n_rows);
  CHECK(strstr(lfmvox_last_error(), "on_text") != NULL, "cancel message: %s", lfmvox_last_error());
  lfmvox_conversation_free(c);

  /* The same trace on a shared engine (2 threads), then barge-in truncation of its speech. */
  lfmvox_engine* e = NULL;
  REQUIRE_OK(lfmvox_engine_create(2, 4, &e));
  lfmvox_conversation_options co;
  lfmvox_conversation_options_init(&co);
  CHECK(co.engine == NULL, "no engine by default");
  co.engine = e;
  co.context = 256;
  REQUIRE_OK(lfmvox_conversation_create(m, &co, &c));
  lfmvox_engine_free(e); /* the conversation keeps it alive */
  REQUIRE_OK(lfmvox_conversation_add_tokens(c, ids, prompt.count));
  memset(&r, 0, sizeof r);
  cb = Callbacks(&r, 1);
  REQUIRE_OK(lfmvox_conversation_generate(c, &o, &cb, &s));
  ExpectRows(&r, &want, "tts__sequential on an engine");
  CHECK(r.samples == 3 * spf, "%zu samples on an engine", r.samples);
  CHECK(lfmvox_conversation_truncate_speech(c, 4 * spf) == LFMVOX_OUT_OF_RANGE, "keeping 4 of 3 frames: %s",
        lfmvox_last_error());
  REQUIRE_OK(lfmvox_conversation_truncate_speech(c, spf + 1));
  REQUIRE_OK(lfmvox_conversation_cancel(c));
  CHECK(lfmvox_conversation_cancel(NULL) == LFMVOX_INVALID_ARGUMENT, "cancel(NULL)");
  lfmvox_conversation_free(c);
  free(prompt.v);
  free(want.v);
}

/* detok__T7: codes [8, 7] frame by frame -> the oracle PCM. */
static void Detokenize(void) {
  char dir[1024];
  Path(dir, sizeof dir, "lfm25_detok");
  lfmvox_detokenizer* d = NULL;
  REQUIRE_OK(lfmvox_detokenizer_load(dir, &d));
  lfmvox_detokenizer_info info;
  REQUIRE_OK(lfmvox_detokenizer_get_info(d, &info));
  CHECK(info.num_codebooks == 8 && info.samples_per_frame == 1920 && info.sample_rate == 24000, "info");
  Npy codes = LoadNpy("lfm25_detok/traces/detok__T7__codes.npy");
  Npy ref = LoadNpy("lfm25_detok/traces/detok__T7__pcm.npy");
  const size_t T = codes.dims[1];
  CHECK(codes.rank == 2 && codes.dims[0] == 8 && ref.count == T * 1920, "trace shapes");
  lfmvox_detok_stream* st = NULL;
  REQUIRE_OK(lfmvox_detok_stream_create(d, 2, 1, &st));
  lfmvox_detokenizer_free(d); /* the stream keeps the model alive */
  float* pcm = calloc(ref.count + 1920, sizeof(float));
  size_t total = 0;
  for (size_t t = 0; t < T; ++t) {
    int32_t frame[8];
    for (size_t k = 0; k < 8; ++k) frame[k] = (int32_t)codes.v[k * T + t];
    size_t n = 0;
    REQUIRE_OK(lfmvox_detok_stream_push(st, frame, 1, pcm + total, 1920, &n));
    CHECK(n == (t == 0 ? 1920 - (size_t)info.tail_samples : 1920), "frame %zu gave %zu samples", t, n);
    total += n;
  }
  size_t n = 0;
  REQUIRE_OK(lfmvox_detok_stream_flush(st, pcm + total, 1920, &n));
  total += n;
  CHECK(total == ref.count, "%zu samples, the trace has %zu", total, ref.count);
  double scale = 0, worst = 0;
  for (size_t i = 0; i < ref.count; ++i) scale = fmax(scale, fabs(ref.v[i]));
  for (size_t i = 0; i < ref.count && i < total; ++i) worst = fmax(worst, fabs(pcm[i] - ref.v[i]));
  CHECK(scale > 0 && worst <= 1e-4 * scale, "max |pcm - oracle| %g, scale %g", worst, scale);
  /* A code outside the codebook is an error that names it. */
  int32_t bad[8] = {1, 2, 3, 4, 5, 6, 7, 2048};
  CHECK(lfmvox_detok_stream_push(st, bad, 1, pcm, 1920, &n) != LFMVOX_OK, "code 2048 accepted");
  CHECK(strstr(lfmvox_last_error(), "2048") != NULL, "message: %s", lfmvox_last_error());
  REQUIRE_OK(lfmvox_detok_stream_reset(st));
  lfmvox_detok_stream_free(st);
  free(pcm);
  free(codes.v);
  free(ref.v);
}

#ifdef LFMVOX_WITH_LFM3 /* a build with the LFM3-Audio family (LFMVOX_FAMILIES) */
/* LFM3-Audio's codec through the same calls (lfm3_tiny/traces/codec__T4__{codes,pcm}.npy): 12 codes a
 * frame, frame-major in the trace; end-of-audio (2016) is not a code a stream takes. The model itself
 * (backbone) is not supported yet: loading it is an error naming the family. */
static void Lfm3Codec(void) {
  char dir[1024];
  Path(dir, sizeof dir, "lfm3_tiny");
  lfmvox_detokenizer* d = NULL;
  REQUIRE_OK(lfmvox_detokenizer_load(dir, &d));
  lfmvox_detokenizer_info info;
  REQUIRE_OK(lfmvox_detokenizer_get_info(d, &info));
  CHECK(info.num_codebooks == 12 && info.codebook_size == 2016 && info.samples_per_frame == 1920 &&
            info.sample_rate == 24000 && info.tail_samples == 480,
        "lfm3 info: %d codebooks, %d codes, %d samples", info.num_codebooks, info.codebook_size,
        info.samples_per_frame);
  Npy codes = LoadNpy("lfm3_tiny/traces/codec__T4__codes.npy");
  Npy ref = LoadNpy("lfm3_tiny/traces/codec__T4__pcm.npy");
  const size_t T = codes.dims[0];
  CHECK(codes.rank == 2 && codes.dims[1] == 12 && ref.count == T * 1920, "lfm3 trace shapes");
  lfmvox_detok_stream* st = NULL;
  REQUIRE_OK(lfmvox_detok_stream_create(d, 1, 1, &st));
  lfmvox_detokenizer_free(d);
  float* pcm = calloc(ref.count + 1920, sizeof(float));
  size_t total = 0, n = 0;
  for (size_t t = 0; t < T; ++t) {
    int32_t frame[12];
    for (size_t k = 0; k < 12; ++k) frame[k] = (int32_t)codes.v[t * 12 + k];
    REQUIRE_OK(lfmvox_detok_stream_push(st, frame, 1, pcm + total, 1920, &n));
    total += n;
  }
  REQUIRE_OK(lfmvox_detok_stream_flush(st, pcm + total, 1920, &n));
  total += n;
  CHECK(total == ref.count, "lfm3: %zu samples, the trace has %zu", total, ref.count);
  double scale = 0, worst = 0;
  for (size_t i = 0; i < ref.count; ++i) scale = fmax(scale, fabs(ref.v[i]));
  for (size_t i = 0; i < ref.count && i < total; ++i) worst = fmax(worst, fabs(pcm[i] - ref.v[i]));
  CHECK(scale > 0 && worst <= 1e-4 * scale, "lfm3: max |pcm - oracle| %g, scale %g", worst, scale);
  int32_t eos[12] = {0, 0, 0, 0, 0, 2016, 0, 0, 0, 0, 0, 0};
  CHECK(lfmvox_detok_stream_push(st, eos, 1, pcm, 1920, &n) != LFMVOX_OK, "lfm3: code 2016 accepted");
  CHECK(strstr(lfmvox_last_error(), "2016") != NULL, "message: %s", lfmvox_last_error());
  lfmvox_detok_stream_free(st);
  lfmvox_model* m = (lfmvox_model*)1;
  CHECK(lfmvox_model_load(dir, &m) != LFMVOX_OK && m == NULL, "lfm3 model loaded");
  CHECK(strstr(lfmvox_last_error(), "LFM3-Audio") != NULL, "message: %s", lfmvox_last_error());
  free(pcm);
  free(codes.v);
  free(ref.v);
}
#endif

static void ErrorPaths(const lfmvox_model* m) {
  const char* missing = "/nonexistent/lfmvox_c_api_missing_model";
  lfmvox_model* none = (lfmvox_model*)1;
  int rc = lfmvox_model_load(missing, &none);
  CHECK(rc != LFMVOX_OK && none == NULL, "loading a missing dir: rc %d", rc);
  CHECK(strstr(lfmvox_last_error(), missing) != NULL, "message lacks the path: %s", lfmvox_last_error());
  CHECK(lfmvox_model_load(NULL, &none) == LFMVOX_INVALID_ARGUMENT, "NULL dir");

  /* A config of another family is refused with what it names. */
  char dir[] = "/tmp/lfmvox_c_api_XXXXXX";
  if (mkdtemp(dir)) {
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    FILE* f = fopen(cfg, "w");
    if (f) {
      fputs("{\"architectures\": [\"WhisperForConditionalGeneration\"], \"model_type\": \"whisper\"}\n", f);
      fclose(f);
    }
    rc = lfmvox_model_load(dir, &none);
    CHECK(rc == LFMVOX_UNIMPLEMENTED, "another family: rc %d", rc);
    CHECK(strstr(lfmvox_last_error(), "WhisperForConditionalGeneration") != NULL &&
              strstr(lfmvox_last_error(), "LFM2.5-Audio") != NULL,
          "message: %s", lfmvox_last_error());
    remove(cfg);
    rmdir(dir);
  }

  lfmvox_conversation* c = NewConversation(m, 1);
  rc = lfmvox_conversation_start_speech(c, "robot", "hello");
  CHECK(rc == LFMVOX_INVALID_ARGUMENT, "bad voice: rc %d", rc);
  const char* const* voices = NULL;
  size_t n_voices = 0;
  REQUIRE_OK(lfmvox_model_voices(m, &voices, &n_voices));
  CHECK(n_voices == 4, "%zu voices", n_voices);
  for (size_t i = 0; i < n_voices; ++i) {
    CHECK(strstr(lfmvox_last_error(), voices[i]) != NULL, "the message lacks voice %s: %s", voices[i],
          lfmvox_last_error());
  }
  CHECK(n_voices == 4 && strcmp(voices[1], "US female") == 0, "voice order");

  /* Prompt JSON: each malformed segment is refused with what is wrong. */
  struct {
    const char* json;
    const char* expect;
  } bad[] = {
      {"{not json", "JSON"},
      {"[5]", "segment 0"},
      {"[{\"ids\": 5}]", "\"ids\""},
      {"[{\"ids\": [1, \"x\"]}]", "entry 1"},
      {"[{\"ids\": [1, -3]}]", "-3"},
      {"[{\"audio_out\": [[1, 2, 3]]}]", "exactly 8"},
      {"[{\"audio_out\": [[1, 2, 3, 4, 5, 6, 7, 5000]]}]", "5000"},
      {"[{\"audio_out\": [5]}]", "frame 0"},
      {"[{\"ids\": [1]}, {\"speech\": \"x\"}]", "segment 1"},
      {"[{\"audio\": \"no_such_file.wav\"}]", "no_such_file.wav"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    REQUIRE_OK(lfmvox_conversation_reset(c));
    rc = lfmvox_conversation_add_prompt_json(c, bad[i].json, "/tmp");
    CHECK(rc != LFMVOX_OK, "%s accepted", bad[i].json);
    CHECK(strstr(lfmvox_last_error(), bad[i].expect) != NULL, "%s: message lacks \"%s\": %s", bad[i].json,
          bad[i].expect, lfmvox_last_error());
  }
  REQUIRE_OK(lfmvox_conversation_reset(c));
  REQUIRE_OK(lfmvox_conversation_add_prompt_json(
      c, "[{\"ids\": [1, 6]}, {\"audio_out\": [[1,2,3,4,5,6,7,2048]]}]", NULL));
  CHECK(lfmvox_conversation_generate(NULL, NULL, NULL, NULL) == LFMVOX_INVALID_ARGUMENT, "NULL conversation");
  lfmvox_generate_options o;
  CHECK(lfmvox_generate_options_preset(m, 99, &o) == LFMVOX_INVALID_ARGUMENT, "preset 99");
  lfmvox_conversation_free(c);
  lfmvox_conversation_free(NULL);
  lfmvox_model_free(NULL);
}

/* The context policy's mirror: its default, a bad value refused, drop_oldest's stats of a fresh conversation
 * (the policy itself is tested through the C++ API in long_form_test). */
static void ContextPolicy(const lfmvox_model* m) {
  lfmvox_conversation_options o;
  lfmvox_conversation_options_init(&o);
  CHECK(o.context_policy == LFMVOX_CONTEXT_STOP && o.context_reserve == 0, "context policy defaults");
  lfmvox_conversation* c = NULL;
  o.context_policy = 7;
  CHECK(lfmvox_conversation_create(m, &o, &c) == LFMVOX_INVALID_ARGUMENT && c == NULL, "bad policy refused");
  o.context_policy = LFMVOX_CONTEXT_DROP_OLDEST;
  o.context = 128;
  REQUIRE_OK(lfmvox_conversation_create(m, &o, &c));
  const int32_t ids[3] = {1, 6, 7};
  REQUIRE_OK(lfmvox_conversation_add_tokens(c, ids, 3));
  size_t positions = 0, bytes = 0;
  uint64_t dropped = 1;
  REQUIRE_OK(lfmvox_conversation_context_stats(c, &positions, &bytes, &dropped));
  CHECK(positions == 3 && bytes > 0 && dropped == 0, "stats of a new chat: %zu %zu", positions, bytes);
  lfmvox_conversation_free(c);
}

int main(void) {
  /* The library's version is the one include/lfmvox/version.h states. */
  CHECK(strcmp(lfmvox_version(), LFMVOX_VERSION_STRING) == 0, "lfmvox_version() %s", lfmvox_version());
  char dir[1024];
  Path(dir, sizeof dir, "lfm25_tiny");
  lfmvox_model* m = NULL;
  REQUIRE_OK(lfmvox_model_load(dir, &m));
  lfmvox_model_info info;
  REQUIRE_OK(lfmvox_model_get_info(m, &info));
  CHECK(strcmp(info.family, "LFM2.5-Audio") == 0 && info.sample_rate == 24000 && info.num_codebooks == 8 &&
            info.audio_vocab == 2049,
        "info: %s %d %d %d", info.family, info.sample_rate, info.num_codebooks, info.audio_vocab);
  /* The whole snapshot listens and speaks; a null model is an argument error. */
  CHECK(lfmvox_model_can_listen(m) == LFMVOX_OK && lfmvox_model_can_speak(m) == LFMVOX_OK, "capabilities");
  CHECK(lfmvox_model_can_speak(NULL) == LFMVOX_INVALID_ARGUMENT, "can_speak(NULL)");
  lfmvox_generate_options s2s;
  REQUIRE_OK(lfmvox_generate_options_preset(m, LFMVOX_PRESET_SPEECH_TO_SPEECH, &s2s));
  CHECK(s2s.mode == LFMVOX_MODE_INTERLEAVED && s2s.audio_temperature == 1.0f && s2s.audio_top_k == 4 &&
            s2s.text_temperature <= 0,
        "speech-to-speech preset: mode %d, audio %g / %d", s2s.mode, s2s.audio_temperature, s2s.audio_top_k);
  const char* system = NULL;
  REQUIRE_OK(lfmvox_model_default_system_prompt(m, &system));
  CHECK(strcmp(system, "Respond with interleaved text and audio.") == 0, "system prompt %s", system);
  /* Token text, snprintf-style: the length first, then the text. */
  size_t len = 0;
  REQUIRE_OK(lfmvox_model_token_text(m, 7, NULL, 0, &len));
  char text[64];
  size_t len2 = 0;
  REQUIRE_OK(lfmvox_model_token_text(m, 7, text, sizeof text, &len2));
  CHECK(len == len2 && len > 0 && strlen(text) == len, "token 7: %zu vs %zu (\"%s\")", len, len2, text);
  int special = -1;
  REQUIRE_OK(lfmvox_model_is_special_token(m, 7, &special)); /* <|im_end|> in the surrogate tokenizer */
  CHECK(special == 1, "token 7 special: %d", special);

  /* The model's own detokenizer, for the tail length. */
  lfmvox_detokenizer* d = NULL;
  REQUIRE_OK(lfmvox_detokenizer_load(dir, &d));
  lfmvox_detokenizer_info dinfo;
  REQUIRE_OK(lfmvox_detokenizer_get_info(d, &dinfo));
  lfmvox_detokenizer_free(d);

  Transcribe(m);
  Speak(m, &info, &dinfo);
  Detokenize();
#ifdef LFMVOX_WITH_LFM3
  Lfm3Codec();
#endif
  ErrorPaths(m);
  ContextPolicy(m);
  lfmvox_model_free(m);
  if (failures)
    fprintf(stderr, "c_api_test: %d check(s) failed\n", failures);
  else
    printf("c_api_test: all checks passed\n");
  return failures ? 1 : 0;
}

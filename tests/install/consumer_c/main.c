/* A C11 program using the installed lfmvox through pkg-config (tests/install/install_test.sh): prints the
 * library's version and decodes a codes file (text, 8 integers per line) with the detokenizer of the C
 * API, comparing the PCM with the oracle's trace.
 * usage: consumer DETOKENIZER_DIR CODES_FILE ORACLE_PCM.npy */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lfmvox/lfmvox_c.h"

/* A little-endian float32 .npy array, flattened; NULL when it is not one. */
static float* read_npy_f32(const char* path, size_t* count) {
  FILE* f = fopen(path, "rb");
  unsigned char magic[10];
  float* v = NULL;
  size_t cap = 0;
  *count = 0;
  if (!f) return NULL;
  if (fread(magic, 1, 10, f) == 10 && memcmp(magic, "\x93NUMPY", 6) == 0 &&
      fseek(f, (long)(magic[8] | magic[9] << 8), SEEK_CUR) == 0) {
    float x;
    while (fread(&x, sizeof x, 1, f) == 1) {
      if (*count == cap) {
        cap = cap ? 2 * cap : 4096;
        v = realloc(v, cap * sizeof *v);
        if (!v) break;
      }
      v[(*count)++] = x;
    }
  }
  fclose(f);
  return v;
}

int main(int argc, char** argv) {
  lfmvox_detokenizer* detok = NULL;
  lfmvox_detok_stream* stream = NULL;
  lfmvox_detokenizer_info info;
  FILE* codes_file;
  int32_t frame[64];
  float* pcm;
  float* ref;
  size_t pcm_count = 0, pcm_cap, ref_count, written, i;
  double sig = 0, err = 0;
  int rc;

  if (argc != 4) {
    fprintf(stderr, "usage: %s DETOKENIZER_DIR CODES_FILE ORACLE_PCM.npy\n", argv[0]);
    return 2;
  }
  printf("version %s\n", lfmvox_version());
  printf("header_version %s\n", LFMVOX_VERSION_STRING);
  rc = lfmvox_detokenizer_load("/nonexistent/lfmvox/model", &detok);
  printf("missing_model_error %s\n", rc == LFMVOX_OK ? "none" : lfmvox_status_name(rc));

  if (lfmvox_detokenizer_load(argv[1], &detok) != LFMVOX_OK ||
      lfmvox_detokenizer_get_info(detok, &info) != LFMVOX_OK ||
      lfmvox_detok_stream_create(detok, 1, 1, &stream) != LFMVOX_OK) {
    fprintf(stderr, "%s\n", lfmvox_last_error());
    return 1;
  }
  if (info.num_codebooks > 64) return 1;
  codes_file = fopen(argv[2], "r");
  if (!codes_file) return 1;
  pcm_cap = (size_t)info.samples_per_frame * 4096;
  pcm = malloc(pcm_cap * sizeof *pcm);
  if (!pcm) return 1;
  for (;;) {
    int c, k = 0;
    /* Skip "#" comment lines, then read one frame. */
    while ((c = fgetc(codes_file)) == '#') {
      while ((c = fgetc(codes_file)) != '\n' && c != EOF) {
      }
    }
    if (c == EOF) break;
    ungetc(c, codes_file);
    for (k = 0; k < info.num_codebooks; ++k) {
      if (fscanf(codes_file, "%d", &frame[k]) != 1) break;
    }
    if (k == 0) break;
    if (k != info.num_codebooks || pcm_count + (size_t)info.samples_per_frame > pcm_cap) return 1;
    if (lfmvox_detok_stream_push(stream, frame, 1, pcm + pcm_count, pcm_cap - pcm_count, &written) !=
        LFMVOX_OK) {
      fprintf(stderr, "%s\n", lfmvox_last_error());
      return 1;
    }
    pcm_count += written;
    while ((c = fgetc(codes_file)) != '\n' && c != EOF) {
    }
  }
  fclose(codes_file);
  if (lfmvox_detok_stream_flush(stream, pcm + pcm_count, pcm_cap - pcm_count, &written) != LFMVOX_OK)
    return 1;
  pcm_count += written;
  printf("samples %zu\n", pcm_count);

  ref = read_npy_f32(argv[3], &ref_count);
  if (!ref || ref_count != pcm_count) {
    fprintf(stderr, "oracle has %zu samples\n", ref_count);
    return 1;
  }
  for (i = 0; i < ref_count; ++i) {
    const double e = (double)pcm[i] - ref[i];
    sig += (double)ref[i] * ref[i];
    err += e * e;
  }
  printf("snr_db %.1f\n", err > 0 ? 10.0 * log10(sig / err) : 400.0);
  free(ref);
  free(pcm);
  lfmvox_detok_stream_free(stream);
  lfmvox_detokenizer_free(detok);
  return 0;
}

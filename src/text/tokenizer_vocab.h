// The tokenizer as a GGUF file stores it: the `tokenizer.ggml.*` metadata that llama.cpp's converter
// (convert_hf_to_gguf.py, _set_vocab_gpt2) writes from a tokenizer.json, for byte-level BPE vocabularies.
// Tokenizer::FromVocab reads one, Tokenizer::ExportVocab writes one; see tokenizer.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lfmvox {

struct TokenizerVocab {
  // tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
  enum TokenType : int32_t {
    kNormal = 1,       // a BPE vocabulary entry
    kUnknown = 2,      // not written for gpt2 vocabularies; FromVocab refuses it
    kControl = 3,      // an added token marked special (or spelled like one, "<|...|>")
    kUserDefined = 4,  // an added token not marked special ("python" in LFM2)
    kUnused = 5,       // "[PAD<id>]": an id tokenizer.json leaves undefined, below config.json's vocab_size
    kByte = 6,         // SentencePiece byte-fallback pieces; FromVocab refuses it
  };

  std::string model;                     // tokenizer.ggml.model: "gpt2" (byte-level BPE)
  std::string pre;                       // tokenizer.ggml.pre: "lfm2" ("llama-bpe" in older conversions)
  std::vector<std::string> tokens;       // tokenizer.ggml.tokens, by id; byte-level spelling ("Ġthe")
  std::vector<int32_t> token_types;      // tokenizer.ggml.token_type, one TokenType per token
  std::vector<std::string> merges;       // tokenizer.ggml.merges, by rank: "left right"
  int32_t bos = -1, eos = -1, pad = -1;  // tokenizer.ggml.{bos,eos,padding}_token_id; -1 when absent
  // tokenizer.ggml.add_{bos,eos}_token. When the file lacks add_bos_token, llama.cpp takes true for the
  // LFM2 pre names (and false for add_eos); a reader filling this struct should do the same.
  bool add_bos = false, add_eos = false;
  std::string chat_template;  // tokenizer.chat_template (Jinja)
};

// What Tokenizer::ExportVocab takes from outside tokenizer.json: config.json and tokenizer_config.json
// values, as the converter reads them.
struct VocabExportOptions {
  // config.json's vocab_size (65,536 for LFM2): ids below it that the tokenizer leaves undefined are written
  // as "[PAD<id>]" of type kUnused. 0: one past the tokenizer's largest id.
  int32_t vocab_size = 0;
  int32_t bos = -1;  // -1: the token the post-processor template puts in front, if any (LFM2: 1)
  int32_t eos = -1;  // -1: the token the template puts after, if any (LFM2's has none; config.json says 7)
  int32_t pad = -1;  // tokenizer.json has no pad token; config.json's pad_token_id (LFM2: 0)
  std::string chat_template;
};

}  // namespace lfmvox

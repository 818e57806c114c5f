// Text tokenizer for LFM2-family models: reads a Hugging Face `tokenizer.json` of the byte-level BPE kind and
// reproduces what the `tokenizers` library (Rust 0.22) encodes and decodes. Nothing about the vocabulary is
// built in; every id, token, merge, regex and template comes from the file. A GGUF file's tokenizer.ggml.*
// vocabulary (tokenizer_vocab.h) loads through FromVocab into the same tokenizer.
//
// Supported file contents (anything else is refused at load with an Unimplemented error naming it):
//   normalizer      null
//   pre_tokenizer   null, Split (Regex or String pattern, any behavior, invert), ByteLevel, Sequence of these
//   model           BPE (vocab, merges as pairs or "a b" strings, unk_token, fuse_unk, byte_fallback,
//                   continuing_subword_prefix, end_of_word_suffix, ignore_merges; dropout null or 0)
//   post_processor  null, ByteLevel, TemplateProcessing, Sequence of these
//   decoder         ByteLevel, or a Sequence holding only ByteLevel decoders
//   truncation / padding   null
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "text/tokenizer_vocab.h"

namespace lfmvox {

namespace text {
struct TokenizerData;  // the parsed file; defined in tokenizer.cc
}  // namespace text

class Tokenizer {
 public:
  // Reads and validates a tokenizer.json. Errors: NotFound/IoError for the file, DataLoss for JSON that is
  // malformed or inconsistent (a merge naming a token not in the vocabulary, an added token whose id
  // disagrees with the vocabulary, ...), Unimplemented for a component type this reader does not handle.
  static Result<Tokenizer> LoadFile(const std::string& tokenizer_json_path);
  static Result<Tokenizer> LoadJson(std::string_view json_text);

  // The tokenizer a GGUF file's tokenizer.ggml.* metadata describes: the same one the tokenizer.json it was
  // converted from gives (encodings, decodings, special tokens, vocab_size), when that file is of the kind
  // the GGUF can describe (what ExportVocab accepts). `pre` "lfm2", "llama-bpe" and "llama3" all mean LFM2's
  // pre-tokenizer: Split on the Llama-3 pattern (Isolated), then ByteLevel without prefix space or regex,
  // with ignore_merges false as in LFM2's tokenizer.json (llama.cpp sets it true for these names).
  // Tokens of type kControl / kUserDefined become added tokens, special / not special, matched in the
  // raw / normalized text (tokenizers' defaults for special and plain added tokens); kUnused entries are
  // undefined ids. add_bos / add_eos make the post-processor template. Errors: Unimplemented for a model
  // other than "gpt2", an unknown `pre`, or token types kUnknown / kByte; DataLoss for an inconsistent
  // vocabulary (a type count that differs from the token count, an empty, repeated or non-UTF-8 token, a
  // merge that is not "a b" or names a token not in the vocabulary, a special id on an unused entry,
  // add_bos without a bos); OutOfRange for more than 2^21 tokens, more than 1 GiB of text, or a special id
  // outside the token list.
  static Result<Tokenizer> FromVocab(const TokenizerVocab& vocab);

  // The GGUF vocabulary llama.cpp's converter writes for this tokenizer: tokens by id up to
  // options.vocab_size with "[PAD<id>]" (kUnused) in the holes, kControl for added tokens that are special
  // or spelled like control tokens ("<|...|>", "<pad>", "<mask>", "<unused...>", ...), kUserDefined (with
  // U+2581 written as a space) for the other added tokens, kNormal for the rest; merges by rank as "a b";
  // bos / eos and add_bos / add_eos from the post-processor template unless the options name them.
  // Unimplemented when the GGUF cannot describe this tokenizer: a pre-tokenizer other than LFM2's, BPE
  // options other than tokenizers' defaults (unk_token, byte_fallback, ignore_merges, subword affixes), a
  // template with more than one token before or after the text, an id that is both a vocabulary entry and a
  // different added token, or a merge part holding a space. Added-token flags (lstrip, rstrip, single_word,
  // normalized) are not written, as the converter does not write them: FromVocab(ExportVocab()) encodes
  // like this tokenizer when they have the defaults FromVocab assumes, as LFM2's do.
  Result<TokenizerVocab> ExportVocab(const VocabExportOptions& options = {}) const;

  // encode(text, add_special_tokens=False), which is how liquid-audio encodes every prompt piece. Added
  // tokens written in the text ("<|im_start|>", and non-special ones such as "python") are cut out first,
  // anywhere in the text, with their lstrip/rstrip/single_word/normalized flags; the rest goes through the
  // pre-tokenizer and BPE. Text must be valid UTF-8 (InvalidArgument names the first bad byte): the library
  // takes Rust/Python strings, which cannot hold anything else, so there is no reference behaviour to copy.
  Result<std::vector<int32_t>> Encode(std::string_view utf8_text) const;
  // encode(text, add_special_tokens=True): Encode plus the post-processor's single-sequence template
  // (for LFM2, "<|startoftext|> $A", i.e. BOS id 1 in front).
  Result<std::vector<int32_t>> EncodeWithSpecialTokens(std::string_view utf8_text) const;

  // decode(ids, skip_special_tokens): added tokens take precedence over the model vocabulary, unknown ids are
  // dropped silently, skip_special_tokens drops only tokens marked special (not "python"/"Mathias"), and the
  // bytes of the whole sequence are converted at once, each ill-formed UTF-8 subsequence becoming one U+FFFD.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Incremental Decode for generated tokens. Push returns the text completed so far and holds back a trailing
  // incomplete UTF-8 character until a later token completes it; Finish flushes what is held (as U+FFFD if it
  // never completed). The concatenation of all Push results and Finish equals Decode of all the ids.
  // Holds its own reference to the tokenizer's data, so it may outlive the Tokenizer it came from.
  class StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
    std::string Push(int32_t id);
    void Push(int32_t id, std::string* out);  // appends to *out instead of returning a new string
    std::string Finish();
    // Forgets held bytes, to start a new sequence.
    void Reset() { pending_.clear(); }

   private:
    std::shared_ptr<const text::TokenizerData> data_;
    bool skip_special_tokens_;
    std::string pending_;  // [< 4 bytes between calls] the start of a character not yet complete
  };

  // Token id by its text, added tokens first ("<|audio_start|>" -> 128 in LFM2.5), then the BPE vocabulary
  // (byte-level form: "Ġthe").
  std::optional<int32_t> TokenId(std::string_view token) const;
  // Token text by id (added token or vocabulary entry); empty for an id the file does not define.
  std::string_view TokenText(int32_t id) const;
  // Whether `id` is an added token marked special (what skip_special_tokens removes).
  bool IsSpecialToken(int32_t id) const;
  // One past the largest id the file defines (64,400 for LFM2). Ids below it may still be undefined holes;
  // the model's embedding table is usually larger (65,536 for LFM2).
  int32_t vocab_size() const;

 private:
  explicit Tokenizer(std::shared_ptr<const text::TokenizerData> data) : data_(std::move(data)) {}
  Result<std::vector<int32_t>> EncodeImpl(std::string_view utf8_text, bool add_special_tokens) const;

  std::shared_ptr<const text::TokenizerData> data_;  // immutable after load: copies and threads share it
};

}  // namespace lfmvox

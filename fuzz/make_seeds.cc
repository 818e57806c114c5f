// Writes the generated seed corpora: the deeply nested and oversized inputs (up to 1 MiB, libFuzzer's
// -max_len in fuzz/run.sh) that would be megabytes in git. fuzz/run.sh runs it before fuzzing:
//   make_seeds OUT_DIR        writes OUT_DIR/<target>/<name> for every target (config, tokenizer, ...)
// The checked-in seeds in fuzz/corpus/ are the small valid and invalid files; these are their hostile
// extremes: nesting ~100 000 deep, a million values, sizes and counts near 2^64, a 1 MiB string.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace {

constexpr size_t kMax = size_t{1} << 20;  // fuzz/run.sh's -max_len
std::filesystem::path g_out;
int g_written = 0;

bool Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::filesystem::path dir = g_out / target;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return false;
  std::FILE* f = std::fopen((dir / name).c_str(), "wb");
  if (f == nullptr) return false;
  const std::string_view b(bytes.data(), bytes.size() < kMax ? bytes.size() : kMax);
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  ++g_written;
  return std::fclose(f) == 0 && ok;
}

std::string Repeat(std::string_view s, size_t n) {
  std::string r;
  r.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) r += s;
  return r;
}

// A JSON value nested `depth` deep: [[[ ... ]]] (closed, so it is valid JSON past the depth limit).
std::string DeepArray(size_t depth) { return Repeat("[", depth) + Repeat("]", depth); }
std::string DeepObject(size_t depth) { return Repeat("{\"a\":", depth) + "0" + Repeat("}", depth); }
// A flat list of n small values.
std::string WideArray(size_t n) {
  std::string r = "[";
  for (size_t i = 0; i < n; ++i) r += i ? ",0" : "0";
  return r + "]";
}

void Le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// --- config.json (fuzz_config: the first byte picks the reader, mod 4) --------------------------------
bool Config() {
  bool ok = true;
  for (int reader = 0; reader < 4; ++reader) {
    const std::string r(1, static_cast<char>('0' + reader));
    ok &= Write("config", r + "_deep_array", r + DeepArray(100000));
    ok &= Write("config", r + "_deep_object", r + DeepObject(60000));
    ok &= Write("config", r + "_wide", r + "{\"full_attn_idxs\":" + WideArray(500000) + "}");
    ok &= Write("config", r + "_long_string", r + "{\"model_type\":\"" + std::string(kMax - 64, 'x') + "\"}");
  }
  // Sizes that ask for gigabytes.
  ok &= Write("config", "1_huge_window",
              "1{\"hidden_size\":512,\"num_hidden_layers\":8,\"sliding_window\":8000000,\"layer_types\":"
              "[\"conv\",\"sliding_attention\"],\"num_attention_heads\":16,\"num_key_value_heads\":8}");
  ok &= Write("config", "0_huge_fft",
              "0{\"preprocessor\":{\"n_fft\":1048576,\"features\":4096,\"sample_rate\":16000},"
              "\"encoder\":{\"feat_in\":128,\"d_model\":1048576,\"n_layers\":1000000}}");
  ok &= Write("config", "2_huge_dims",
              "2{\"hidden_size\":4294967296,\"vocab_size\":9223372036854775807,\"num_hidden_layers\":-1,"
              "\"intermediate_size\":1e308,\"num_attention_heads\":0}");
  return ok;
}

// --- tokenizer.json (fuzz_tokenizer: first byte 0 = tokenizer.json, 1 = text, 2 = ids) ----------------
bool Tokenizer() {
  bool ok = true;
  ok &= Write("tokenizer", "0_deep_array", std::string("\0", 1) + DeepArray(100000));
  ok &= Write("tokenizer", "0_deep_pretokenizer",
              std::string("\0", 1) + "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}," +
                  "\"pre_tokenizer\":" + DeepObject(50000) + "}");
  // A big vocabulary (a 300 MB tokenizer.json, scaled to the 1 MiB cap).
  std::string vocab = "{";
  for (int i = 0; vocab.size() < kMax - 4096; ++i)
    vocab += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":" + std::to_string(i);
  vocab += "}";
  ok &= Write("tokenizer", "0_big_vocab",
              std::string("\0", 1) + "{\"model\":{\"type\":\"BPE\",\"vocab\":" + vocab + ",\"merges\":[]}}");
  // A pre-tokenizer regex with nested lookahead, then text for it.
  ok &= Write("tokenizer", "0_lookahead",
              std::string("\0", 1) +
                  "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"!\":1},\"merges\":[]},\"pre_tokenizer\":"
                  "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a(?=.*.*.*!)\"},\"behavior\":\"Isolated\"}}" +
                  std::string(4000, 'a'));
  // Long texts for the surrogate: one word, spaces, digits, multi-byte UTF-8.
  ok &= Write("tokenizer", "1_one_word", "\1" + std::string(kMax - 1, 'a'));
  ok &= Write("tokenizer", "1_spaces", "\1" + std::string(kMax - 1, ' '));
  ok &= Write("tokenizer", "1_digits", "\1" + std::string(kMax - 1, '7'));
  ok &= Write("tokenizer", "1_utf8", "\1" + Repeat("\xE4\xBD\xA0", (kMax - 1) / 3));
  std::string ids = "\2";
  for (uint32_t i = 0; ids.size() + 4 <= kMax; ++i) Le(ids, i * 2654435761u, 4);
  ok &= Write("tokenizer", "2_ids", ids);
  return ok;
}

// --- prompt JSON (fuzz_prompt) -------------------------------------------------------------------
bool Prompt() {
  bool ok = true;
  ok &= Write("prompt", "deep_array", DeepArray(100000));
  ok &= Write("prompt", "deep_in_segment", "[{\"ids\":" + DeepArray(100000) + "}]");
  ok &= Write("prompt", "deep_object", DeepObject(60000));
  ok &= Write("prompt", "many_ids", "[{\"ids\":" + WideArray(500000) + "}]");
  std::string frames = "[{\"audio_out\":[";
  for (int i = 0; frames.size() < kMax - 64; ++i) frames += (i ? ",[1,2,3,4,5,6,7,8]" : "[1,2,3,4,5,6,7,8]");
  ok &= Write("prompt", "many_frames", frames + "]}]");
  ok &= Write("prompt", "recut_frames", "[{\"audio_out\":[[1,2,3,4,5,6,7],[1,2,3,4,5,6,7,8,9]]}]");
  ok &= Write("prompt", "long_text", "[{\"text\":\"" + Repeat("hello ", (kMax - 32) / 6) + "\"}]");
  ok &= Write("prompt", "many_segments", "[" + Repeat("{\"text\":\"a\"},", 70000) + "{\"ids\":[1]}]");
  ok &= Write("prompt", "huge_numbers",
              "[{\"ids\":[18446744073709551615,-9223372036854775808,1e308,2147483648]},"
              "{\"audio_out\":[[2048,0,0,0,0,0,0,-1]]}]");
  return ok;
}

// --- safetensors (fuzz_safetensors): u64 header length, JSON header, data -----------------------------
std::string Safetensors(const std::string& header, uint64_t claimed_len) {
  std::string s;
  Le(s, claimed_len, 8);
  return s + header;
}
bool SafetensorsSeeds() {
  bool ok = true;
  const std::string deep_shape =
      "{\"t\":{\"dtype\":\"F32\",\"shape\":" + DeepArray(100000) + ",\"data_offsets\":[0,4]}}";
  ok &= Write("safetensors", "deep_shape", Safetensors(deep_shape, deep_shape.size()));
  const std::string deep = DeepObject(60000);
  ok &= Write("safetensors", "deep_header", Safetensors(deep, deep.size()));
  std::string empties = "{";
  for (int i = 0; empties.size() < kMax - 64; ++i)
    empties += (i ? ",\"" : "\"") + std::to_string(i) + "\":{}";
  empties += "}";
  ok &= Write("safetensors", "many_empty_objects", Safetensors(empties, empties.size()));
  std::string tensors = "{";
  for (int i = 0; tensors.size() < kMax - 128; ++i) {
    tensors += (i ? ",\"t" : "\"t") + std::to_string(i) +
               "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * i) + "," +
               std::to_string(4 * i + 4) + "]}";
  }
  tensors += "}";
  ok &= Write("safetensors", "many_tensors", Safetensors(tensors, tensors.size()) + std::string(4096, '\0'));
  const std::string small =
      "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}";
  ok &= Write("safetensors", "huge_shape", Safetensors(small, small.size()) + std::string(4, '\0'));
  ok &= Write("safetensors", "huge_header_len", Safetensors(small, ~uint64_t{0}));
  return ok;
}

// --- GGUF (fuzz_gguf) ----------------------------------------------------------------------------
void GgufHeader(std::string& s, uint64_t tensors, uint64_t kvs) {
  s += "GGUF";
  Le(s, 3, 4);
  Le(s, tensors, 8);
  Le(s, kvs, 8);
}
void GgufKey(std::string& s, std::string_view key, uint32_t type) {
  Le(s, key.size(), 8);
  s += key;
  Le(s, type, 4);
}
bool Gguf() {
  bool ok = true;
  std::string s;
  GgufHeader(s, ~uint64_t{0} >> 1, ~uint64_t{0} >> 1);
  ok &= Write("gguf", "huge_counts", s);
  // Arrays of arrays, nested until the 1 MiB cap: each level is type 9 (array), count 1.
  s.clear();
  GgufHeader(s, 0, 1);
  GgufKey(s, "deep", 9);
  while (s.size() + 12 < kMax) {
    Le(s, 9, 4);
    Le(s, 1, 8);
  }
  ok &= Write("gguf", "deep_arrays", s);
  // An array claiming 2^60 u8 values, a string claiming 2^63 bytes.
  s.clear();
  GgufHeader(s, 0, 1);
  GgufKey(s, "big", 9);
  Le(s, 0, 4);
  Le(s, uint64_t{1} << 60, 8);
  ok &= Write("gguf", "huge_array", s + std::string(4096, '\1'));
  s.clear();
  GgufHeader(s, 0, 1);
  GgufKey(s, "str", 8);
  Le(s, uint64_t{1} << 63, 8);
  ok &= Write("gguf", "huge_string", s + "abc");
  // 50 000 tiny keys.
  s.clear();
  GgufHeader(s, 0, 50000);
  for (int i = 0; i < 50000; ++i) {
    GgufKey(s, "k" + std::to_string(i), 0);
    s.push_back('\0');
  }
  ok &= Write("gguf", "many_keys", s);
  // A tensor with four dimensions of 2^40 and one with 1000 dimensions.
  s.clear();
  GgufHeader(s, 2, 0);
  Le(s, 1, 8);
  s += "a";
  Le(s, 4, 4);
  for (int d = 0; d < 4; ++d) Le(s, uint64_t{1} << 40, 8);
  Le(s, 0, 4);
  Le(s, 0, 8);
  Le(s, 1, 8);
  s += "b";
  Le(s, 1000, 4);
  for (int d = 0; d < 1000; ++d) Le(s, 1, 8);
  Le(s, 0, 4);
  Le(s, 0, 8);
  ok &= Write("gguf", "huge_tensor", s + std::string(64, '\0'));
  return ok;
}

// --- .npy (fuzz_npy) ------------------------------------------------------------------------------
std::string Npy(const std::string& dict, int version) {
  std::string s = "\x93NUMPY";
  s.push_back(static_cast<char>(version));
  s.push_back('\0');
  std::string h = dict;
  const size_t pre = 6 + 2 + (version == 1 ? 2 : 4);
  while ((pre + h.size() + 1) % 64 != 0) h.push_back(' ');
  h.push_back('\n');
  Le(s, h.size(), version == 1 ? 2 : 4);
  return s + h;
}
bool NpySeeds() {
  bool ok = true;
  ok &= Write("npy", "huge_shape",
              Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 1) +
                  std::string(16, '\0'));
  ok &= Write("npy", "overflow_shape",
              Npy("{'descr': '<i8', 'fortran_order': False, 'shape': (18446744073709551615, 3), }", 1));
  ok &= Write("npy", "deep_parens",
              Npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + Repeat("(", 60000) +
                      Repeat(")", 60000) + ", }",
                  2));
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  while (many.size() < 60000) many += "1, ";
  ok &= Write("npy", "many_dims", Npy(many + "), }", 2) + std::string(4, '\0'));
  // v2 header length 2^32 - 1 over a short file; a 1 MiB valid array.
  std::string lie = "\x93NUMPY\x02";
  lie.push_back('\0');
  Le(lie, 0xFFFFFFFFu, 4);
  ok &= Write("npy", "huge_header_len", lie + "{'descr': '<f4'");
  ok &= Write("npy", "big_valid",
              Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (8, 32000), }", 1) +
                  std::string(8 * 32000 * 4, '\0'));
  return ok;
}

// --- codes text (fuzz_codes: first byte picks num_codebooks mod 66) -----------------------------------
bool Codes() {
  bool ok = true;
  ok &= Write("codes", "long_line", "\x08" + Repeat("1 ", (kMax - 1) / 2));
  ok &= Write("codes", "many_frames", "\x08" + Repeat("1 2 3 4 5 6 7 8\n", (kMax - 1) / 16));
  ok &= Write("codes", "newlines", "\x08" + std::string(kMax - 1, '\n'));
  ok &= Write("codes", "huge_number", "\x08" + std::string(kMax - 1, '9'));
  ok &= Write("codes", "comments", "\x08" + Repeat("#", kMax / 2) + "\n1 2 3 4 5 6 7 8\n");
  return ok;
}

// --- audio (fuzz_audio) ---------------------------------------------------------------------------
std::string Wav(uint16_t format, uint16_t channels, uint32_t rate, uint16_t bits, uint32_t data_len,
                size_t actual) {
  std::string s = "RIFF";
  Le(s, 36 + data_len, 4);
  s += "WAVEfmt ";
  Le(s, 16, 4);
  Le(s, format, 2);
  Le(s, channels, 2);
  Le(s, rate, 4);
  Le(s, uint64_t{rate} * channels * bits / 8, 4);
  Le(s, channels * bits / 8, 2);
  Le(s, bits, 2);
  s += "data";
  Le(s, data_len, 4);
  std::string data(actual, '\0');
  for (size_t i = 0; i < actual; ++i) data[i] = static_cast<char>((i * 37) & 0xFF);
  return s + data;
}
bool Audio() {
  bool ok = true;
  ok &= Write("audio", "claims_4gb", Wav(1, 1, 16000, 16, 0xFFFFFFF0u, kMax - 64));
  ok &= Write("audio", "rate_1mhz", Wav(1, 1, 1000000, 16, kMax - 64, kMax - 64));
  ok &= Write("audio", "rate_1hz", Wav(1, 1, 1, 16, 65536, 65536));
  ok &= Write("audio", "channels_65535", Wav(1, 65535, 16000, 16, kMax - 64, kMax - 64));
  ok &= Write("audio", "f32_1mb", Wav(3, 2, 48000, 32, kMax - 64, kMax - 64));
  return ok;
}

// --- server request bodies (fuzz_server: the first byte picks the parser, mod 4) ----------------------
// '0': the transcription form ("Content-Type\nbody"), '1': speech JSON, '2': chat JSON, '3': base64.
std::string Form(size_t parts, const std::string& file_body) {
  std::string r = "0multipart/form-data; boundary=XY\n";
  for (size_t i = 0; i < parts; ++i) r += "--XY\r\nContent-Disposition: form-data; name=\"p\"\r\n\r\nv\r\n";
  return r + "--XY\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" + file_body +
         "\r\n--XY--\r\n";
}
bool Server() {
  bool ok = true;
  ok &= Write("server", "form_valid", Form(1, "RIFF"));
  ok &= Write("server", "form_many_parts", Form(20000, ""));
  ok &= Write("server", "form_1mb_file", Form(0, std::string(kMax - 200, 'x')));
  ok &= Write("server", "form_truncated", Form(1, std::string(kMax / 2, 'x')).substr(0, kMax / 2));
  ok &= Write("server", "form_long_header",
              "0multipart/form-data; boundary=XY\n--XY\r\nContent-Disposition: form-data; name=\"" +
                  std::string(kMax - 200, 'n') + "\"\r\n\r\nv\r\n--XY--\r\n");
  ok &=
      Write("server", "form_long_boundary", "0multipart/form-data; boundary=" + std::string(kMax - 64, 'b'));
  ok &= Write("server", "speech_deep", "1{\"input\":" + DeepArray(100000) + "}");
  ok &= Write("server", "speech_deep_object", "1" + DeepObject(60000));
  ok &= Write("server", "speech_long_input", "1{\"input\":\"" + std::string(kMax - 64, 'x') + "\"}");
  ok &= Write("server", "speech_wide", "1{\"input\":\"hi\",\"voice\":" + WideArray(500000) + "}");
  ok &= Write("server", "speech_seed_2_64", "1{\"input\":\"hi\",\"seed\":18446744073709551616}");
  ok &= Write("server", "chat_deep_content",
              "2{\"messages\":[{\"role\":\"user\",\"content\":" + DeepArray(100000) + "}]}");
  ok &= Write("server", "chat_many_messages",
              "2{\"messages\":[" + Repeat("{\"role\":\"user\",\"content\":\"hi\"},", 30000) + "{}]}");
  ok &= Write("server", "chat_1mb_audio",
              "2{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\",\"input_audio\":{"
              "\"data\":\"" +
                  std::string(kMax - 200, 'A') + "\",\"format\":\"wav\"}}]}]}");
  ok &= Write("server", "base64_1mb", "3" + std::string(kMax - 1, 'Q'));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  g_out = argv[1];
  const bool ok = Config() && Tokenizer() && Prompt() && SafetensorsSeeds() && Gguf() && NpySeeds() &&
                  Codes() && Audio() && Server();
  if (!ok) {
    std::fprintf(stderr, "make_seeds: cannot write under %s\n", argv[1]);
    return 1;
  }
  std::printf("make_seeds: %d seeds under %s\n", g_written, argv[1]);
  return 0;
}

// End-to-end checks of `lfmvox detokenize`: the WAV and the raw stdout stream
// hold the oracle PCM (tests/data/lfm25_detok/traces/detok__T45__pcm.npy)
// for examples/codes.txt (the same codes as detok__T45__codes.npy), and bad
// input gives a clear error with a non-zero exit, never a crash.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <sndfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lfmvox/version.h"
#include "poison_util.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

CliRun RunBinary(const std::string& binary, const std::string& args) {
  const std::string err_path = testing::ScratchPath("cli_stderr.txt");
  const std::string cmd = binary + " " + args + " 2>" + err_path;
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

CliRun Cli(const std::string& args) { return RunBinary(LFMVOX_CLI, args); }

const std::string kModel = testing::DataPath("lfm25_detok");

// A copy of the model folder `base` (tests/data/<base>) in a scratch folder: every entry a symlink to
// the original but config.json, written with each `from` replaced by `to` (each must occur).
std::string ModelVariant(const std::string& name, const std::string& base,
                         const std::vector<std::pair<std::string, std::string>>& edits) {
  namespace fs = std::filesystem;
  const fs::path src = fs::canonical(testing::DataPath(base));
  const fs::path dir = testing::ScratchPath("variant_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const fs::directory_entry& e : fs::directory_iterator(src)) {
    if (e.path().filename() == "config.json" || e.path().filename() == "traces") continue;
    fs::create_symlink(fs::canonical(e.path()), dir / e.path().filename());
  }
  std::ifstream in(src / "config.json");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& [from, to] : edits) {
    const size_t at = config.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) config.replace(at, from.size(), to);
  }
  std::ofstream(dir / "config.json") << config;
  return dir.string();
}
const std::string kCodes = std::string(LFMVOX_SOURCE_DIR) + "/examples/codes.txt";

TEST(Cli, WavHoldsTheOraclePcm) {
  const std::string wav = testing::ScratchPath("cli_out.wav");
  const CliRun r = Cli("detokenize --model " + kModel + " --codes " + kCodes + " -o " + wav + " --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  SF_INFO info{};
  SNDFILE* f = sf_open(wav.c_str(), SFM_READ, &info);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(info.samplerate, 24000);
  EXPECT_EQ(info.channels, 1);
  EXPECT_EQ(info.format & SF_FORMAT_SUBMASK, SF_FORMAT_PCM_16);
  std::vector<short> s(static_cast<size_t>(info.frames));
  sf_read_short(f, s.data(), info.frames);
  sf_close(f);
  const std::vector<float> ref = testing::LoadTrace("lfm25_detok/traces/detok__T45__pcm.npy").ToFloat();
  ASSERT_EQ(s.size(), ref.size());
  // s16 quantisation: round(x·32767) is within half a step of the exact value,
  // plus the PCM tolerance (1e-4 of the 0.3 scale ≈ 1 step).
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(s[i] - ref[i] * 32767.0));
  EXPECT_LE(worst, 1.0);
}

TEST(Cli, StdoutStreamsRawFloat) {
  const CliRun r = Cli("detokenize --model " + kModel + " --codes " + kCodes + " -o - --pcm f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<float> ref = testing::LoadTrace("lfm25_detok/traces/detok__T45__pcm.npy").ToFloat();
  ASSERT_EQ(r.out.size(), ref.size() * 4);
  std::vector<float> pcm(ref.size());
  std::memcpy(pcm.data(), r.out.data(), r.out.size());
  EXPECT_GE(testing::SnrDb(pcm.data(), ref, 0, ref.size()), 100.0);
}

// `lfmvox detokenize` on an LFM3-Audio codec (12 codes a line): lfm3_tiny/traces/codec__T45__codes.npy
// written as text, decoded to raw f32 on stdout, against codec__T45__pcm.npy (k = 1e-4 of the PCM
// scale, the oracle's tolerance); the end-of-audio code is refused by name. Only in a build with the family.
TEST(Cli, DetokenizesAnLfm3Codec) {
#ifndef LFMVOX_WITH_LFM3
  GTEST_SKIP() << "this build has no LFM3-Audio family (LFMVOX_FAMILIES)";
#endif
  const std::vector<int64_t> codes = testing::LoadTrace("lfm3_tiny/traces/codec__T45__codes.npy").ToInt64();
  const std::vector<float> ref = testing::LoadTrace("lfm3_tiny/traces/codec__T45__pcm.npy").ToFloat();
  const std::string txt = testing::ScratchPath("lfm3_codes.txt");
  {
    std::ofstream f(txt);
    for (size_t i = 0; i < codes.size(); ++i) f << codes[i] << ((i + 1) % 12 == 0 ? "\n" : " ");
  }
  const std::string model = testing::DataPath("lfm3_tiny");
  const CliRun r = Cli("detokenize --model " + model + " --codes " + txt + " -o - --pcm f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.size(), ref.size() * 4);
  std::vector<float> pcm(ref.size());
  std::memcpy(pcm.data(), r.out.data(), r.out.size());
  const testing::Diff d = testing::Compare(pcm.data(), ref);
  EXPECT_LE(d.max_abs, 1e-4 * d.scale) << "scale " << d.scale;
  std::ofstream(txt, std::ios::trunc) << "1 2 3 4 5 2016 7 8 9 10 11 12\n";
  const CliRun bad =
      Cli("detokenize --model " + model + " --codes " + txt + " -o " + testing::ScratchPath("lfm3.wav"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("2016"), std::string::npos) << bad.err;
}

TEST(Cli, BadInputIsAClearError) {
  const std::string dir = testing::ScratchPath("cli_bad");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/big.txt") << "1 2 3 4 5 6 7 2048\n";
  std::ofstream(dir + "/neg.txt") << "1 2 3 4 5 6 7 -1\n";
  std::ofstream(dir + "/short.txt") << "1 2 3 4 5 6 7 8\n1 2 3\n";
  std::ofstream(dir + "/junk.txt") << "hello world\n";
  std::ofstream(dir + "/bad.safetensors") << "\xff\xff\xff\xff\xff\xff\xff\x7f{}";
  struct Case {
    std::string args;
    int code;
    const char* expect;
  };
  const std::string base = "detokenize --model " + kModel + " -o " + dir + "/x.wav --codes ";
  const Case cases[] = {
      {base + dir + "/big.txt", 1, "2048"},
      {base + dir + "/neg.txt", 1, "line 1"},
      {base + dir + "/short.txt", 1, "line 2"},
      {base + dir + "/junk.txt", 1, "line 1"},
      {base + dir + "/missing.txt", 1, "missing.txt"},
      {"detokenize --model " + dir + " --codes " + kCodes + " -o " + dir + "/x.wav", 1, "config"},
      {"detokenize --model " + kModel + " --codes " + kCodes + " -o " + dir + "/x.wav --pcm s24", 2, "--pcm"},
      {"detokenize --model " + kModel + " --codes " + kCodes, 2, "needs"},
      {"transmogrify", 2, "unknown command"},
  };
  for (const Case& c : cases) {
    const CliRun r = Cli(c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
}

// Outputs are all or nothing. detokenize checks every code before it opens the output,
// so a bad code on the last line leaves no WAV behind, and an existing file is left as it was.
TEST(Cli, FailedRunLeavesNoOutput) {
  const std::string dir = testing::ScratchPath("cli_all_or_nothing");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string codes;
  {
    std::ifstream in(kCodes);
    codes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(dir + "/codes.txt") << codes << "1 2 3 4 5 6 7 2048\n";
  const std::string wav = dir + "/x.wav";
  CliRun r = Cli("detokenize --model " + kModel + " --codes " + dir + "/codes.txt -o " + wav);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("is 2048, outside [0, 2048)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(wav));
  std::ofstream(wav) << "previous take";
  r = Cli("detokenize --model " + kModel + " --codes " + dir + "/codes.txt -o " + wav);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::ifstream in(wav);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()),
            "previous take");
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 2u) << "only codes.txt and the old x.wav; no temporary file";
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Output paths that are not plain new files (base/file_write.h's policy through the CLI): the WAV of
// WavHoldsTheOraclePcm's run, written to a FIFO with a reader, through a symlink into another folder,
// over a file of mode 0640, to /dev/null and /dev/full; and raw PCM to a reader that leaves early.
TEST(Cli, OutputPathsStayWhatTheyWere) {
  namespace fs = std::filesystem;
  const std::string dir = testing::ScratchPath("cli_output_paths");
  fs::remove_all(dir);
  fs::create_directories(dir + "/a");
  fs::create_directories(dir + "/b");
  const std::string args = "detokenize --model " + kModel + " --codes " + kCodes + " --quiet -o ";
  ASSERT_EQ(Cli(args + dir + "/plain.wav").exit_code, 0);
  const std::string wav = FileBytes(dir + "/plain.wav");
  ASSERT_GT(wav.size(), 44u);

  // A FIFO with a reader gets the whole file and stays a FIFO.
  const std::string fifo = dir + "/pipe.wav";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = FileBytes(fifo); });
  const CliRun to_fifo = Cli(args + fifo);
  reader.join();
  EXPECT_EQ(to_fifo.exit_code, 0) << to_fifo.err;
  EXPECT_EQ(got, wav);
  EXPECT_EQ(fs::status(fifo).type(), fs::file_type::fifo);

  // A link in b/ to a file in a/: the file is written, the link stays.
  std::ofstream(dir + "/a/take.wav") << "previous take";
  fs::create_symlink("../a/take.wav", dir + "/b/link.wav");
  ASSERT_EQ(::chmod((dir + "/a/take.wav").c_str(), 0640), 0);
  const CliRun to_link = Cli(args + dir + "/b/link.wav");
  EXPECT_EQ(to_link.exit_code, 0) << to_link.err;
  EXPECT_TRUE(fs::is_symlink(dir + "/b/link.wav"));
  EXPECT_EQ(FileBytes(dir + "/a/take.wav"), wav);
  EXPECT_EQ(fs::status(dir + "/a/take.wav").permissions() & fs::perms::mask,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read)
      << "the file's mode 0640 is kept";
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir + "/a")) ++entries;
  EXPECT_EQ(entries, 1u) << "no temporary file beside the target";

  // Devices are written through: /dev/null stays a device, /dev/full is an error.
  const CliRun to_null = Cli(args + "/dev/null");
  EXPECT_EQ(to_null.exit_code, 0) << to_null.err;
  EXPECT_EQ(fs::status("/dev/null").type(), fs::file_type::character);
  const CliRun to_full = Cli(args + "/dev/full");
  EXPECT_EQ(to_full.exit_code, 1) << to_full.err;
  EXPECT_NE(to_full.err.find("/dev/full"), std::string::npos) << to_full.err;
  EXPECT_NE(to_full.err.find(std::strerror(ENOSPC)), std::string::npos) << to_full.err;
  EXPECT_EQ(fs::status("/dev/full").type(), fs::file_type::character);

  // `| head -c 100`: raw f32 (45 frames × 1920 samples × 4 bytes, beyond a pipe's buffer) to a reader
  // that takes 100 bytes and goes: exit 1 with a message, not death by SIGPIPE.
  const std::string err_path = dir + "/err.txt";
  FILE* p = popen((std::string(LFMVOX_CLI) + " " + args + "- --pcm f32 2>" + err_path).c_str(), "r");
  ASSERT_NE(p, nullptr);
  char head[100];
  EXPECT_EQ(std::fread(head, 1, sizeof head, p), sizeof head);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string err = FileBytes(err_path);
  EXPECT_NE(err.find("stdout"), std::string::npos) << err;
  fs::remove_all(dir);
}

std::string DemoCheckpoint(bool steered);

// Two `quantize` runs to one folder at once: every file is whole (each equals a lone run's).
TEST(Cli, ConcurrentQuantizeRunsLeaveWholeFiles) {
  namespace fs = std::filesystem;
  const std::string model = DemoCheckpoint(false);
  const std::string lone = testing::ScratchPath("cli_quantize_lone"),
                    both = testing::ScratchPath("cli_quantize_both");
  fs::remove_all(lone);
  fs::remove_all(both);
  ASSERT_EQ(Cli("quantize --model " + model + " --type q8_0 --out " + lone).exit_code, 0);
  const std::string cmd = std::string(LFMVOX_CLI) + " quantize --model " + model + " --type q8_0 --out " +
                          both + " >/dev/null 2>&1";
  int rc1 = -1, rc2 = -1;
  std::thread t1([&] { rc1 = std::system(cmd.c_str()); });
  std::thread t2([&] { rc2 = std::system(cmd.c_str()); });
  t1.join();
  t2.join();
  EXPECT_EQ(rc1, 0);
  EXPECT_EQ(rc2, 0);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(lone)) {
    ++files;
    EXPECT_EQ(FileBytes((fs::path(both) / e.path().filename()).string()), FileBytes(e.path().string()))
        << e.path().filename();
  }
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(both)) ++entries;
  EXPECT_GT(files, 0u);
  EXPECT_EQ(entries, files) << "no temporary file is left";
  fs::remove_all(lone);
  fs::remove_all(both);
}

// Sizes from a config are bounded before anything is allocated, through the CLI: the detokenizer
// windows a hostile config asked for (500 000; 8 000 000 with its positions raised to match,
// refused by the memory budget), n_fft 2^20 with 4096 features, more mels than FFT bins, and
// the encoder's feat_in against the preprocessor's features.
TEST(Cli, ConfigSizesAreBoundedBeforeAllocation) {
  const std::string wav = testing::ScratchPath("bounded.wav");
  const std::string window =
      ModelVariant("window", "lfm25_detok", {{"\"sliding_window\": 30", "\"sliding_window\": 500000"}});
  CliRun r = Cli("detokenize --model " + window + " --codes " + kCodes + " -o " + wav);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("\"sliding_window\" = 500000 exceeds \"max_position_embeddings\" = 128000"),
            std::string::npos)
      << r.err;
  const std::string huge =
      ModelVariant("huge_window", "lfm25_detok",
                   {{"\"sliding_window\": 30", "\"sliding_window\": 8000000"},
                    {"\"max_position_embeddings\": 128000", "\"max_position_embeddings\": 8000000"}});
  ::setenv("LFMVOX_MEMORY_LIMIT", "1G", 1);
  r = Cli("detokenize --model " + huge + " --codes " + kCodes + " -o " + wav);
  ::unsetenv("LFMVOX_MEMORY_LIMIT");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("K/V caches"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GiB"), std::string::npos) << r.err;

  const std::string clip = testing::DataPath("inputs/synthetic_16k.wav");
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, std::string>> edits;
    const char* expect;
  };
  const Case cases[] = {
      {"n_fft",
       {{"\"n_fft\": 512", "\"n_fft\": 1048576"},
        {"\"features\": 128", "\"features\": 4096"},
        {"\"feat_in\": 128", "\"feat_in\": 4096"}},
       "\"n_fft\" = 1048576 is outside"},
      {"mels",
       {{"\"features\": 128", "\"features\": 4096"}, {"\"feat_in\": 128", "\"feat_in\": 4096"}},
       "exceed the 257 FFT bins"},
      {"feat_in",
       {{"\"feat_in\": 128", "\"feat_in\": 80"}},
       "\"feat_in\" = 80 but [preprocessor] \"features\" = 128"},
  };
  for (const Case& c : cases) {
    const std::string dir = ModelVariant(std::string("tiny_") + c.name, "lfm25_tiny", c.edits);
    r = Cli("asr --model " + dir + " " + clip);
    EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.name << ": " << r.err;
  }
}

}  // namespace
}  // namespace lfmvox

namespace lfmvox {
namespace {

// `lfmvox generate` on the text-only prompt reproduces tts/sequential of both
// oracle cases (tests/data/lfm25_{tiny,small}/traces/tts__sequential.npy).
TEST(Cli, GenerateReproducesTtsTrace) {
  for (const std::string c : {"lfm25_tiny", "lfm25_small"}) {
    std::string ids;
    for (int64_t v : testing::LoadTrace(c + "/traces/tts__text_ids.npy").ToInt64()) {
      ids += (ids.empty() ? "" : ", ") + std::to_string(v);
    }
    const std::string prompt = testing::ScratchPath("prompt_" + std::string(c) + ".json");
    std::ofstream(prompt) << "[{\"ids\": [" << ids << "]}]";
    const CliRun r =
        Cli("generate --model " + testing::DataPath(c) + " --prompt " + prompt + " --max-new 24 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<int64_t> want = testing::LoadTrace(c + "/traces/tts__sequential.npy").ToInt64();
    std::istringstream lines(r.out);
    std::string line;
    size_t row = 0;
    while (std::getline(lines, line)) {
      ASSERT_LT(row, 24u);
      const int64_t* w = &want[row * 9];
      std::string expect;
      if (w[0] == 0) {
        expect = "{\"text\":" + std::to_string(w[1]) + ",";
        EXPECT_EQ(line.rfind(expect, 0), 0u) << c << " row " << row << ": " << line;
      } else {
        expect = "{\"audio\":[";
        for (int k = 0; k < 8; ++k) {
          if (k > 0) expect += ',';
          expect += std::to_string(w[1 + k]);
        }
        expect += "]}";
        EXPECT_EQ(line, expect) << c << " row " << row;
      }
      ++row;
    }
    EXPECT_EQ(row, 24u) << c;
  }
}

// Compares JSON lines with trace rows [kind, id | 8 codes].
void ExpectRows(const std::string& out, const std::vector<int64_t>& want, size_t n, const std::string& what) {
  std::istringstream lines(out);
  std::string line;
  size_t row = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(row, n) << what;
    const int64_t* w = &want[row * 9];
    if (w[0] == 0) {
      EXPECT_EQ(line.rfind("{\"text\":" + std::to_string(w[1]) + ",", 0), 0u)
          << what << " row " << row << ": " << line;
    } else {
      std::string expect = "{\"audio\":[";
      for (int k = 0; k < 8; ++k) {
        if (k > 0) expect += ',';
        expect += std::to_string(w[1 + k]);
      }
      EXPECT_EQ(line, expect + "]}") << what << " row " << row;
    }
    ++row;
  }
  EXPECT_EQ(row, n) << what;
}

// `lfmvox generate` with an {"audio": file} segment reproduces gen/interleaved
// and gen/sequential (tests/data/lfm25_tiny/traces/gen__*.npy).
TEST(Cli, GenerateWithAudioSegment) {
  const std::vector<int64_t> text = testing::LoadTrace("lfm25_tiny/traces/prefill__text_ids.npy").ToInt64();
  std::string pre, post;
  for (size_t i = 0; i < text.size(); ++i)
    (i < 13 ? pre : post) += (i == 0 || i == 13 ? "" : ", ") + std::to_string(text[i]);
  const std::string prompt = testing::ScratchPath("prompt_audio.json");
  std::ofstream(prompt) << "[{\"ids\": [" << pre << "]}, {\"audio\": \""
                        << testing::DataPath("inputs/synthetic_16k.wav") << "\"}, {\"ids\": [" << post
                        << "]}]";
  for (const std::string mode : {"interleaved", "sequential"}) {
    const CliRun r = Cli("generate --model " + testing::DataPath("lfm25_tiny") + " --prompt " + prompt +
                         " --mode " + mode + " --max-new 16 --quiet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ExpectRows(r.out, testing::LoadTrace("lfm25_tiny/traces/gen__" + mode + ".npy").ToInt64(), 16, mode);
  }
}

// Options are parsed strictly. A negative or overflowing seed is a usage error (strtoull
// made both 2^64 - 1); --temperature 1e-37, inside the documented range, samples (the t -> 0 limit is the
// greedy choice, so the rows are tts/sequential's) instead of failing on an infinite logit; tts takes
// --context like generate and chat.
TEST(Cli, OptionsAreValidatedStrictly) {
  const std::string model = testing::DataPath("lfm25_tiny");
  std::string ids;
  for (int64_t v : testing::LoadTrace("lfm25_tiny/traces/tts__text_ids.npy").ToInt64()) {
    ids += (ids.empty() ? "" : ", ") + std::to_string(v);
  }
  const std::string prompt = testing::ScratchPath("strict_prompt.json");
  std::ofstream(prompt) << "[{\"ids\": [" << ids << "]}]";
  const std::string gen = "generate --model " + model + " --prompt " + prompt + " --max-new 24 --quiet";
  for (const std::string seed : {"-1", "18446744073709551616", "99999999999999999999999", "1x", "+5", ""}) {
    const CliRun r = Cli(gen + " --seed '" + seed + "'");
    EXPECT_EQ(r.exit_code, 2) << seed << ": " << r.err;
    EXPECT_NE(r.err.find("--seed takes an integer in [0, 18446744073709551615]"), std::string::npos)
        << seed << ": " << r.err;
  }
  EXPECT_EQ(Cli(gen + " --seed 18446744073709551615").exit_code, 0);
  const CliRun tiny = Cli(gen + " --temperature 1e-37");
  ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
  ExpectRows(tiny.out, testing::LoadTrace("lfm25_tiny/traces/tts__sequential.npy").ToInt64(), 24,
             "temperature 1e-37");

  const std::string tts = "tts --model " + model + " -o " + testing::ScratchPath("strict.wav") + " hello";
  const CliRun bad_ctx = Cli(tts + " --context 0");
  EXPECT_EQ(bad_ctx.exit_code, 2) << bad_ctx.err;
  EXPECT_NE(bad_ctx.err.find("--context takes a positive integer"), std::string::npos) << bad_ctx.err;
  const CliRun ctx = Cli(tts + " --context 4");
  EXPECT_EQ(ctx.err.find("unknown option"), std::string::npos) << ctx.err;
}

// Prompt checks through the CLI: a prompt frame of 7 codes (then 9) is
// refused naming the frame, "ids": 5 naming the segment and key, text that is not JSON says so.
TEST(Cli, PromptErrorsAreClear) {
  const std::string model = testing::DataPath("lfm25_tiny");
  const std::string prompt = testing::ScratchPath("careless_prompt.json");
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {R"([{"audio_out": [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9]]}])",
       "segment 0: \"audio_out\" frame 0 must be a list of exactly 8 codes"},
      {R"([{"ids": 5}])", "segment 0: \"ids\" must be a list"},
      {R"([{"ids": [1]}, {"audio_out": {"a": [1]}}])", "segment 1: \"audio_out\" must be a list"},
      {"{not json", "is not valid JSON"},
  };
  for (const Case& c : cases) {
    std::ofstream(prompt, std::ios::trunc) << c.text;
    const CliRun r = Cli("generate --model " + model + " --prompt " + prompt + " --max-new 2 --quiet");
    EXPECT_EQ(r.exit_code, 1) << c.text << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.text << "\n" << r.err;
  }
}

// The clip limit through the CLI: a 61 s clip is refused from its header, before it is decoded, with
// the limit in the message.
TEST(Cli, ClipLimitComesFromTheHeader) {
  const std::string model = testing::DataPath("lfm25_tiny");
  const std::string prompt = testing::ScratchPath("clip_prompt.json");
  const std::string clip = testing::ScratchPath("cli_61s.wav");
  {
    SF_INFO info{};
    info.samplerate = 16000;
    info.channels = 1;
    info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    SNDFILE* f = sf_open(clip.c_str(), SFM_WRITE, &info);
    ASSERT_NE(f, nullptr);
    const std::vector<short> zeros(61 * 16000, 0);
    sf_write_short(f, zeros.data(), static_cast<sf_count_t>(zeros.size()));
    sf_close(f);
  }
  std::ofstream(prompt, std::ios::trunc) << "[{\"audio\": \"" << clip << "\"}]";
  const CliRun r = Cli("generate --model " + model + " --prompt " + prompt + " --threads 1 --quiet");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("976000 frames (61.0 s at 16000 Hz, 1 channels) is over the limit of 60 s"),
            std::string::npos)
      << r.err;
}

// Messages through the CLI: a corrupt MP3 is not reported as missing, and a NUL byte in a
// safetensors dtype does not cut the message short.
TEST(Cli, MessagesDoNotMislead) {
  const std::string mp3 = testing::ScratchPath("corrupt.mp3");
  {
    std::string bytes = "\xff\xfb\x90\x64";
    uint32_t x = 12345;
    for (int i = 0; i < 5000; ++i) {
      x = x * 1103515245u + 12345u;
      bytes += static_cast<char>(x >> 24);
    }
    std::ofstream(mp3, std::ios::binary) << bytes;
  }
  const std::string prompt = testing::ScratchPath("corrupt_mp3_prompt.json");
  std::ofstream(prompt) << "[{\"audio\": \"" << mp3 << "\"}]";
  CliRun r = Cli("generate --model " + testing::DataPath("lfm25_tiny") + " --prompt " + prompt + " --quiet");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("corrupt.mp3: not a readable audio file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("does not exist"), std::string::npos) << r.err;

  const std::string dir = testing::ScratchPath("nul_dtype");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kModel + "/config.json", dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string header = R"({"t":{"dtype":"F3\u00002 junk","shape":[1],"data_offsets":[0,4]}})";
  std::string file(8, '\0');
  for (int b = 0; b < 8; ++b) file[b] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
  file += header + std::string(4, '\0');
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << file;
  r = Cli("detokenize --model " + dir + " --codes " + kCodes + " -o " + dir + "/x.wav");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("has dtype \"F3\\x002 junk\", which lfmvox does not read"), std::string::npos)
      << r.err;
}

// lfmvox-make-checkpoint checks every option before it writes anything: a vocabulary
// of 99999999999 (which aborted) or -5 (silently ignored), a seed "abc" (silently 0), an option without
// its value, and a missing tokenizer (found only after the weights were written) write no folder.
TEST(Cli, MakeCheckpointValidatesFirst) {
  const std::string out = testing::ScratchPath("made_checkpoint");
  struct Case {
    std::string args;
    int code;
    const char* expect;
  };
  const Case cases[] = {
      {"detokenizer --out " + out + " --vocab 99999999999", 2,
       "--vocab takes an integer in [1, 262144], not 99999999999"},
      {"detokenizer --out " + out + " --vocab -5", 2, "--vocab takes an integer in [1, 262144], not -5"},
      {"detokenizer --out " + out + " --seed abc", 2,
       "--seed takes an integer in [0, 18446744073709551615], not abc"},
      {"detokenizer --out " + out + " --seed -1", 2, "--seed takes an integer"},
      {"detokenizer --out " + out + " --seed", 2, "option --seed needs a value"},
      {"detokenizer --out " + out + " --size demo", 2, "are for lfm25-audio"},
      {"lfm25-audio --size demo --out " + out + " --tokenizer " + testing::ScratchPath("no_tokenizer.json"),
       1, "does not exist or is not a file; nothing was written"},
      {"lfm25-audio --size huge --out " + out + " --tokenizer " +
           testing::DataPath("tokenizer/tokenizer.json"),
       2, "--size takes real or demo, not huge"},
  };
  for (const Case& c : cases) {
    std::filesystem::remove_all(out);
    const CliRun r = RunBinary(LFMVOX_MAKE_CHECKPOINT, c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

TEST(Cli, TtsRejectsUnknownVoiceAndBadPrompt) {
  const CliRun voice = Cli("tts --model " + testing::DataPath("lfm25_tiny") + " --voice robot hello -o " +
                           testing::ScratchPath("v.wav"));
  EXPECT_EQ(voice.exit_code, 1);
  EXPECT_NE(voice.err.find("US female"), std::string::npos) << voice.err;
  const std::string bad = testing::ScratchPath("bad_prompt.json");
  std::ofstream(bad) << "[{\"ids\": [1, 99999]}]";
  const CliRun r = Cli("generate --model " + testing::DataPath("lfm25_tiny") + " --prompt " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("99999"), std::string::npos) << r.err;
  std::ofstream(bad) << "{not json";
  EXPECT_EQ(Cli("generate --model " + testing::DataPath("lfm25_tiny") + " --prompt " + bad).exit_code, 1);
  // A prompt longer than the context.
  std::ofstream(bad) << "[{\"ids\": [1, 6, 7, 10, 6, 7, 10]}]";
  const CliRun ctx =
      Cli("generate --model " + testing::DataPath("lfm25_tiny") + " --prompt " + bad + " --context 4");
  EXPECT_EQ(ctx.exit_code, 1);
  EXPECT_NE(ctx.err.find("context"), std::string::npos) << ctx.err;
}

// Long-form TTS and ASR on demo checkpoints lfmvox-make-checkpoint writes (the real tokenizer; the TTS
// one steered so "Hello there." is spoken). The library side is long_form_test's; here the CLI's wiring.
std::string DemoCheckpoint(bool steered) {
  const std::string d = testing::ScratchPath(steered ? "cli_demo_tts" : "cli_demo_chat");
  std::string args =
      "lfm25-audio --size demo --tokenizer " + testing::DataPath("tokenizer/tokenizer.json") + " --out " + d;
  if (steered) args += " --steer-tts 'Hello there.' --voice 'US female'";
  EXPECT_EQ(RunBinary(LFMVOX_MAKE_CHECKPOINT, args).exit_code, 0);
  return d;
}

sf_count_t WavFrames(const std::string& path) {
  SF_INFO info{};
  SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
  if (f == nullptr) return -1;
  sf_close(f);
  return info.frames;
}

// LFM2-Audio-1.5B's layout through the CLI (a demo lfmvox-make-checkpoint writes, Mimi as its codec,
// steered on its own TTS prompt), and a partial GGUF set: the backbone and mmproj transcribe; asked to
// speak, they name the file they lack.
TEST(Cli, Lfm2AudioAndPartialGgufSets) {
  namespace fs = std::filesystem;
  const std::string d = testing::ScratchPath("cli_lfm2_audio");
  fs::remove_all(d);
  ASSERT_EQ(RunBinary(LFMVOX_MAKE_CHECKPOINT, "lfm2-audio --size demo --tokenizer " +
                                                  testing::DataPath("tokenizer/tokenizer.json") + " --out " +
                                                  d + " --steer-tts 'Hello there.'")
                .exit_code,
            0);
  const std::string wav = testing::ScratchPath("cli_lfm2.wav");
  const CliRun tts = Cli("tts --model " + d + " --max-new 30 --seed 1 'Hello there.' -o " + wav);
  ASSERT_EQ(tts.exit_code, 0) << tts.err;
  const sf_count_t frames = WavFrames(wav);
  EXPECT_GT(frames, 0);
  EXPECT_EQ(frames % 1920, 0);  // whole Mimi frames: nothing held back
  const CliRun chat = Cli("chat --model " + d + " --in " + testing::DataPath("inputs/question.wav") +
                          " --out " + testing::ScratchPath("cli_lfm2_s2s.wav") + " --max-new 30 --seed 1");
  EXPECT_EQ(chat.exit_code, 0) << chat.err;
  const CliRun preset = Cli("tts --model " + d + " --voice 'US male' hello -o " + wav);
  EXPECT_EQ(preset.exit_code, 1);
  EXPECT_NE(preset.err.find("describe the voice"), std::string::npos) << preset.err;

  const std::string full = testing::ScratchPath("cli_partial_full"),
                    asr = testing::ScratchPath("cli_partial_asr");
  fs::remove_all(full);
  fs::remove_all(asr);
  const CliRun q = Cli("quantize --model " + DemoCheckpoint(false) + " --type q8_0 --out " + full);
  ASSERT_EQ(q.exit_code, 0) << q.err;
  fs::create_directories(asr);
  for (const auto& e : fs::directory_iterator(full)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("vocoder-", 0) != 0 && n.rfind("tokenizer-", 0) != 0)
      fs::copy_file(e.path(), fs::path(asr) / n);
  }
  const CliRun heard = Cli("asr --model " + asr + " --max-new 8 " + testing::DataPath("inputs/question.wav"));
  EXPECT_EQ(heard.exit_code, 0) << heard.err;
  const CliRun mute = Cli("tts --model " + asr + " hello -o " + wav);
  EXPECT_EQ(mute.exit_code, 1);
  EXPECT_NE(mute.err.find("vocoder-*.gguf"), std::string::npos) << mute.err;
  fs::remove_all(d);
  fs::remove_all(full);
  fs::remove_all(asr);
}

TEST(Cli, TtsFileSpeaksSentenceBySentence) {
  const std::string model = DemoCheckpoint(true);
  const std::string one = testing::ScratchPath("tts_one.wav"), two = testing::ScratchPath("tts_two.wav"),
                    piped = testing::ScratchPath("tts_piped.wav"),
                    text = testing::ScratchPath("tts_text.txt");
  const std::string common = "tts --model " + model + " --seed 3 --max-new 20 --threads 1 ";
  ASSERT_EQ(Cli(common + "'Hello there.' -o " + one).exit_code, 0);
  std::ofstream(text) << "Hello there.\nHello there.";
  const CliRun r = Cli(common + "--file " + text + " -o " + two);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("2 sentences"), std::string::npos) << r.err;
  // Each sentence a fresh prompt of the same seed: twice the lone sentence and one 120 ms gap.
  ASSERT_GT(WavFrames(one), 0);
  EXPECT_EQ(WavFrames(two), 2 * WavFrames(one) + 2880);
  ASSERT_EQ(Cli(common + "--file - -o " + piped + " < " + text).exit_code, 0);
  EXPECT_EQ(WavFrames(piped), WavFrames(two));
  EXPECT_EQ(Cli(common + "--file " + testing::ScratchPath("no_such.txt") + " -o " + two).exit_code, 1);
  std::ofstream(text) << "?!.";
  const CliRun empty = Cli(common + "--file " + text + " -o " + two);
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.err.find("nothing to speak"), std::string::npos) << empty.err;
}

// The s16 samples of an audio file libsndfile reads (WAV, FLAC), empty when it cannot.
std::vector<short> S16Samples(const std::string& path) {
  SF_INFO info{};
  SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
  if (f == nullptr) return {};
  std::vector<short> s(static_cast<size_t>(info.frames));
  s.resize(static_cast<size_t>(sf_read_short(f, s.data(), info.frames)));
  sf_close(f);
  return s;
}

// -o picks the container from the extension: a .flac from detokenize (the oracle codes) and from tts (a
// fixed seed) holds exactly the s16 samples the .wav of the same run holds (FLAC is lossless).
TEST(Cli, FlacOutputHoldsTheWavSamples) {
  const std::string wav = testing::ScratchPath("cli_fmt.wav"), flac = testing::ScratchPath("cli_fmt.flac");
  const std::string detok = "detokenize --model " + kModel + " --codes " + kCodes + " --threads 1 -o ";
  ASSERT_EQ(Cli(detok + wav).exit_code, 0);
  const CliRun r = Cli(detok + flac);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(flac, std::ios::binary);
  char magic[4] = {};
  f.read(magic, 4);
  EXPECT_EQ(std::string(magic, 4), "fLaC");
  const std::vector<short> detok_wav = S16Samples(wav);
  ASSERT_EQ(detok_wav.size(), testing::LoadTrace("lfm25_detok/traces/detok__T45__pcm.npy").ToFloat().size());
  EXPECT_EQ(S16Samples(flac), detok_wav);

  const std::string tts =
      "tts --model " + DemoCheckpoint(true) + " --seed 3 --max-new 20 --threads 1 'Hello.' -o ";
  ASSERT_EQ(Cli(tts + wav).exit_code, 0);
  ASSERT_EQ(Cli(tts + flac).exit_code, 0);
  const std::vector<short> tts_wav = S16Samples(wav);
  ASSERT_GT(tts_wav.size(), 0u);
  EXPECT_EQ(S16Samples(flac), tts_wav);
}

// The numbers of `--verbose`: five stage lines and the wall / real-time-factor line.
struct Timings {
  std::vector<std::pair<std::string, double>> stages;  // name, ms
  int prefill_positions = -1, backbone_steps = -1, depth_frames = -1;
  double wall_ms = -1, stages_ms = -1, audio_s = -1, rtf = -1;
};

Timings ParseTimings(const std::string& err) {
  Timings t;
  const std::regex stage(R"(lfmvox: stage (\w+) ([0-9.]+) ms(?: \((\d+) \w+\))?)");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), stage); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    t.stages.emplace_back(m[1], std::stod(m[2]));
    const int count = m[3].matched ? std::stoi(m[3]) : -1;
    if (m[1] == "prefill") t.prefill_positions = count;
    if (m[1] == "backbone_step") t.backbone_steps = count;
    if (m[1] == "depth_head") t.depth_frames = count;
  }
  std::smatch m;
  const std::regex total(
      R"(lfmvox: wall ([0-9.]+) ms \(stages ([0-9.]+) ms\), audio ([0-9.]+) s, real-time factor ([0-9.]+))");
  if (std::regex_search(err, m, total)) {
    t.wall_ms = std::stod(m[1]);
    t.stages_ms = std::stod(m[2]);
    t.audio_s = std::stod(m[3]);
    t.rtf = std::stod(m[4]);
  }
  return t;
}

// The printed values are rounded to 0.001 ms / 0.001 s / 0.0001: each check allows that rounding.
void ExpectConsistent(const Timings& t) {
  ASSERT_EQ(t.stages.size(), 5u);
  const char* names[] = {"encoder", "prefill", "backbone_step", "depth_head", "detokenizer"};
  double sum = 0;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t.stages[i].first, names[i]);
    EXPECT_GE(t.stages[i].second, 0.0);
    sum += t.stages[i].second;
  }
  ASSERT_GT(t.wall_ms, 0.0);
  ASSERT_GT(t.audio_s, 0.0);
  EXPECT_NEAR(sum, t.stages_ms, 6 * 0.0005);
  // The stages run inside the timed call, one after another.
  EXPECT_LE(t.stages_ms, t.wall_ms + 0.001);
  // rtf = wall / audio, from the unrounded values: the rounding of wall (0.0005 ms) and audio (0.0005 s)
  // moves the quotient by at most rtf * (0.0005 / audio + 0.0005 / wall), the print by 0.00005.
  const double rtf = t.wall_ms / 1000 / t.audio_s;
  EXPECT_NEAR(t.rtf, rtf, 0.00005 + rtf * (0.0005 / t.audio_s + 0.0005 / t.wall_ms) + 1e-9);
}

// tts --verbose: the stage counts follow from the generation the summary line reports: every item
// after the first feeds one backbone step (the first is the prompt's prefill), every audio frame one
// depth-head pass; no encoder in TTS; the audio is the WAV's length.
TEST(Cli, VerboseTimingsAddUpAndGiveTheRealTimeFactor) {
  const std::string wav = testing::ScratchPath("cli_verbose.wav");
  const CliRun r = Cli("tts --model " + DemoCheckpoint(true) +
                       " --seed 3 --max-new 20 --threads 1 --verbose 'Hello there.' -o " + wav);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Timings t = ParseTimings(r.err);
  ExpectConsistent(t);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"((\d+) text tokens, (\d+) audio frames)"))) << r.err;
  const int text_tokens = std::stoi(m[1]), audio_frames = std::stoi(m[2]);
  EXPECT_EQ(t.backbone_steps, text_tokens + audio_frames - 1) << r.err;
  EXPECT_EQ(t.depth_frames, audio_frames) << r.err;
  EXPECT_GT(t.prefill_positions, 1);
  EXPECT_EQ(t.stages[0].second, 0.0);  // encoder
  EXPECT_GT(t.stages[1].second, 0.0);  // prefill
  EXPECT_NEAR(t.audio_s, static_cast<double>(S16Samples(wav).size()) / 24000, 0.0005);

  // asr --verbose: the encoder runs, the audio is the input's length.
  const std::string clip = testing::DataPath("inputs/question.wav");
  const CliRun a = Cli("asr --model " + DemoCheckpoint(false) + " --max-new 8 --threads 1 --verbose " + clip);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const Timings ta = ParseTimings(a.err);
  ExpectConsistent(ta);
  EXPECT_GT(ta.stages[0].second, 0.0);  // encoder
  SF_INFO info{};
  SNDFILE* f = sf_open(clip.c_str(), SFM_READ, &info);
  ASSERT_NE(f, nullptr);
  sf_close(f);
  EXPECT_NEAR(ta.audio_s, static_cast<double>(info.frames) / info.samplerate, 0.0005);
}

// Runs `args` with stderr on a pseudo-terminal (stdout to /dev/null) and returns what the terminal got.
std::string RunOnTerminal(const std::string& args) {
  int master = -1, slave = -1;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return "openpty failed";
  const std::string cmd = std::string(LFMVOX_CLI) + " " + args + " > /dev/null";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(slave, STDERR_FILENO);
    close(master);
    close(slave);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(slave);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(master, buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));  // EIO at the end
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  return got;
}

// A progress line (model loading, sentences of tts --file) when stderr is a terminal, rewritten in
// place with "\r" and erase-to-end; none of it when stderr is a file.
TEST(Cli, ProgressLineOnlyOnATerminal) {
  const std::string text = testing::ScratchPath("progress.txt"), wav = testing::ScratchPath("progress.wav");
  std::ofstream(text) << "Hello there.\nHello again.";
  const std::string args = "tts --model " + DemoCheckpoint(true) +
                           " --seed 3 --max-new 10 --threads 1 --file " + text + " -o " + wav;
  const CliRun plain = Cli(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find('\r'), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find("loading"), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find("spoke"), std::string::npos) << plain.err;
  const std::string tty = RunOnTerminal(args);
  EXPECT_NE(tty.find("\r\033[Klfmvox: loading "), std::string::npos) << tty;
  EXPECT_NE(tty.find("\r\033[Klfmvox: spoke 1 of 2 sentences"), std::string::npos) << tty;
  EXPECT_NE(tty.find("\r\033[Klfmvox: spoke 2 of 2 sentences"), std::string::npos) << tty;
  EXPECT_NE(tty.find("2 sentences"), std::string::npos) << tty;  // the summary line still comes
}

TEST(CliLong, InteractiveChatRunsFiveHundredTurns) {
  const std::string model = DemoCheckpoint(false);
  const std::string in = testing::ScratchPath("chat_500.txt"), dir = testing::ScratchPath("chat_500");
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(in);
    for (int t = 0; t < 500; ++t) f << "turn " << t << "\n";
  }
  const std::string common =
      "chat --interactive --model " + model + " --context 128 --max-new 8 --threads 1 --out-dir " + dir;
  const CliRun r = Cli(common + " < " + in);
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0);
  EXPECT_NE(r.err.find("[reply 500 -> "), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir + "/reply_500.wav"));
  // The stop policy on the same script ends at the full context, long before.
  const CliRun stop = Cli(common + " --context-policy stop < " + in);
  EXPECT_EQ(stop.exit_code, 1);
  EXPECT_NE(stop.err.find("context"), std::string::npos);
  EXPECT_EQ(stop.err.find("[reply 100 -> "), std::string::npos);
}

// `lfmvox --version` prints the version written in include/lfmvox/version.h.
TEST(Cli, VersionIsVersionH) {
  const std::string expected = std::to_string(LFMVOX_VERSION_MAJOR) + "." +
                               std::to_string(LFMVOX_VERSION_MINOR) + "." +
                               std::to_string(LFMVOX_VERSION_PATCH);
  EXPECT_EQ(expected, LFMVOX_VERSION_STRING);
  const CliRun r = Cli("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "lfmvox " + expected + "\n");
}

const std::vector<std::string> kCommands = {"detokenize", "tts",      "generate", "asr",
                                            "chat",       "quantize", "serve"};

// The option names (--model, --output, ...) a command's --help lists.
std::vector<std::string> HelpOptions(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream lines(help);
  const std::regex option("--([a-z][a-z0-9-]*)");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("      -", 0) != 0) continue;  // option lines: six spaces, then the flags
    const std::string flags = line.substr(0, line.find("  ", 6));
    for (std::sregex_iterator it(flags.begin(), flags.end(), option), end; it != end; ++it) {
      names.push_back((*it)[1]);
    }
  }
  return names;
}

// `lfmvox help`, `lfmvox CMD --help` and the man page come from one table
// (apps/cli/help.cc) and agree with the parser: every option a command's help lists is one the command
// accepts.
TEST(Cli, HelpOfEachCommandMatchesItsParser) {
  const CliRun all = Cli("help");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const CliRun man = Cli("--man");
  ASSERT_EQ(man.exit_code, 0) << man.err;
  EXPECT_EQ(man.out.rfind(".TH LFMVOX 1 \"\" \"lfmvox " LFMVOX_VERSION_STRING "\"", 0), 0u)
      << man.out.substr(0, 80);
  for (const std::string& cmd : kCommands) {
    SCOPED_TRACE(cmd);
    const CliRun help = Cli(cmd + " --help");
    ASSERT_EQ(help.exit_code, 0) << help.err;
    EXPECT_EQ(help.out.rfind("usage: lfmvox " + cmd + " ", 0), 0u) << help.out;
    EXPECT_EQ(Cli("help " + cmd).out, help.out);  // the same text both ways
    EXPECT_NE(man.out.find("\n.SS " + cmd + "\n"), std::string::npos);
    const std::vector<std::string> names = HelpOptions(help.out);
    EXPECT_GE(names.size(), 3u) << help.out;
    for (const std::string& name : names) {
      // Listed in `lfmvox help` and in the man page (roff escapes each hyphen) as well.
      EXPECT_NE(all.out.find("--" + name), std::string::npos) << name;
      std::string roff = "\\-\\-";
      for (char c : name) roff += c == '-' ? std::string("\\-") : std::string(1, c);
      EXPECT_NE(man.out.find(roff), std::string::npos) << roff;
      // The parser knows it: whatever else is wrong with the command line, not "unknown option".
      const CliRun r = Cli(cmd + " --" + name + " 1");
      EXPECT_NE(r.exit_code, 0) << name;
      EXPECT_EQ(r.err.find("unknown option"), std::string::npos) << name << ": " << r.err;
    }
  }
  // An option no command has is still refused, and help for no command is a usage error.
  const CliRun unknown = Cli("tts --no-such-option 1");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown option --no-such-option"), std::string::npos) << unknown.err;
  // A command's usage error points to that command's help (as serve's do) instead of every command's.
  EXPECT_NE(unknown.err.find("(the options: lfmvox tts --help)"), std::string::npos) << unknown.err;
  EXPECT_EQ(unknown.err.find("quantize"), std::string::npos) << unknown.err;
  const CliRun none = Cli("help no-such-command");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no command no-such-command"), std::string::npos) << none.err;
}

// Non-finite weights, on poisoned copies of the oracle checkpoints
// (tests/poison_util.h). A NaN in lfm25_tiny's layer 0 w1 (element 1000) or a +inf in lfm25_detok's
// (element 5) fails the load naming the tensor; with --no-weight-check the run fails on the non-finite
// values instead of printing tokens (greedy NaN logits used to give <|pad|> forever) or writing a silent
// WAV, and leaves no WAV.
TEST(Cli, NonFiniteWeightsAreRefused) {
  const std::string w1 = "lfm.layers.0.feed_forward.w1.weight";
  const std::string backbone =
      testing::PoisonedCopy("cli_backbone", testing::DataPath("lfm25_tiny"), w1, 1000, NAN);
  std::string ids;
  for (int64_t v : testing::LoadTrace("lfm25_tiny/traces/tts__text_ids.npy").ToInt64()) {
    ids += (ids.empty() ? "" : ", ") + std::to_string(v);
  }
  const std::string prompt = testing::ScratchPath("prompt_poison.json");
  std::ofstream(prompt) << "[{\"ids\": [" << ids << "]}]";
  CliRun r = Cli("generate --model " + backbone + " --prompt " + prompt + " --max-new 8 --quiet");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(w1 + " holds NaN at element 1000"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  r = Cli("generate --model " + backbone + " --prompt " + prompt + " --max-new 8 --quiet --no-weight-check");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("non-finite"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "no item may be printed from NaN logits";

  const std::string detok = testing::PoisonedCopy("cli_detok", kModel, w1, 5, INFINITY);
  const std::string wav = testing::ScratchPath("poison.wav");
  std::filesystem::remove(wav);
  r = Cli("detokenize --model " + detok + " --codes " + kCodes + " -o " + wav);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(w1 + " holds +inf at element 5 (index [0, 5])"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(wav));
  r = Cli("detokenize --model " + detok + " --codes " + kCodes + " -o " + wav + " --no-weight-check");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("non-finite"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(wav)) << "no all-zero WAV";
}

// A hostile regex: a tokenizer.json whose pre-tokenizer is `a(?=.*.*.*!)` (lfm25_tiny otherwise): a
// prompt of 1600 a's stops on the per-text regex budget with a clear error (it ran > 60 s), and writes no
// WAV.
TEST(Cli, HostileRegexStopsOnItsBudget) {
  const std::string dir = testing::PatternCopy("cli", testing::DataPath("lfm25_tiny"), "a(?=.*.*.*!)");
  const std::string wav = testing::ScratchPath("regex.wav");
  std::filesystem::remove(wav);
  const std::string prompt = testing::ScratchPath("prompt_regex.json");
  std::ofstream(prompt) << "[{\"text\": \"" << std::string(1600, 'a') << "\"}]";
  const CliRun r = Cli("generate --model " + dir + " --prompt " + prompt + " -o " + wav + " --quiet");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("match steps for a 1600-byte text"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(wav));
}

// An allocation failure is an error, not an abort. The address space is capped with
// `ulimit -v`: first the smallest cap (in 8 MiB steps) at which `generate --context 64` on lfm25_tiny runs,
// then 48 MiB above it `--context 128000` (~190 MiB more of caches and history, inside the memory budget)
// must fail with exit 1 and the out-of-memory message instead of SIGABRT (134).
// GCC says ASan through __SANITIZE_ADDRESS__, clang through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define LFMVOX_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LFMVOX_TEST_ASAN 1
#endif
#endif

TEST(Cli, OutOfMemoryIsAnErrorNotAnAbort) {
#ifdef LFMVOX_TEST_ASAN
  GTEST_SKIP()
      << "an ASan build reserves terabytes of shadow address space, so it cannot start under ulimit -v "
         "(hostile_test's Exceptions cases cap a forked child instead)";
#endif
  const std::string prompt = testing::ScratchPath("prompt_oom.json");
  std::ofstream(prompt) << "[{\"ids\": [1, 6, 7]}]";
  auto run = [&](int mib, const std::string& context) {
    return RunBinary("ulimit -v " + std::to_string(mib * 1024) + "; exec " + LFMVOX_CLI,
                     "generate --model " + testing::DataPath("lfm25_tiny") + " --prompt " + prompt +
                         " --max-new 1 --threads 1 --context " + context);
  };
  int lo = 8, hi = 8192;  // run(hi) works, run(lo) does not
  ASSERT_EQ(run(hi, "64").exit_code, 0) << run(hi, "64").err;
  while (hi - lo > 8) {
    const int mid = (lo + hi) / 2;
    (run(mid, "64").exit_code == 0 ? hi : lo) = mid;
  }
  const CliRun r = run(hi + 48, "128000");
  EXPECT_EQ(r.exit_code, 1) << "cap " << hi + 48 << " MiB: " << r.err;
  EXPECT_NE(r.err.find("ran out of memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--context"), std::string::npos) << r.err;
}

// The memory budget: LFMVOX_MEMORY_LIMIT=4M refuses a 4096-position conversation of lfm25_tiny before it
// allocates (6.2 MiB of state: see hostile_test's SessionBudget), naming the sizes and --context; 256
// positions run.
TEST(Cli, SessionStateIsCheckedAgainstTheMemoryLimit) {
  const std::string prompt = testing::ScratchPath("prompt_budget.json");
  std::ofstream(prompt) << "[{\"ids\": [1, 6, 7]}]";
  const std::string base = "generate --model " + testing::DataPath("lfm25_tiny") + " --prompt " + prompt +
                           " --max-new 1 --context ";
  CliRun r = RunBinary("LFMVOX_MEMORY_LIMIT=4M " + std::string(LFMVOX_CLI), base + "4096");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("a conversation of 4096 positions needs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lower the context"), std::string::npos) << r.err;
  r = RunBinary("LFMVOX_MEMORY_LIMIT=4M " + std::string(LFMVOX_CLI), base + "256");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace lfmvox

// The CLI's help table and the texts printed from it (help.h).
#include "help.h"

#include <string>

#include "lfmvox/lfmvox.h"

namespace lfmvox_cli {
namespace {

constexpr OptionHelp kPcm = {"--pcm s16|f32", "sample format of the output (default s16)"};
constexpr OptionHelp kThreads = {"--threads N", "threads (default: all cores)"};
constexpr OptionHelp kWeights = {
    "--weights f16|bf16|q8_0|q4_0",
    "quantize a snapshot's matrices at load time (a GGUF file of that type loads "
    "faster and in less memory)"};
constexpr OptionHelp kNoWeightCheck = {
    "--no-weight-check", "skip the NaN/inf scan of the weights at load (for files known to be good)"};
constexpr char kOutputText[] =
    "audio file to write, its container from the extension: .wav (any other name), .flac, .ogg or .opus "
    "(Opus), .mp3, .m4a (AAC in MP4), .aac (ADTS); or - for raw little-endian PCM on stdout as it is "
    "produced";
constexpr OptionHelp kOutput = {"-o, --output F", kOutputText};
constexpr char kAudioIn[] =
    "WAV, FLAC, Ogg Vorbis/Opus, MP3, AIFF (libsndfile), M4A/AAC, WebM/Opus and the rest of what FFmpeg "
    "decodes (found from the content); any rate, mixed to mono";
constexpr OptionHelp kVerbose = {
    "--verbose",
    "print each stage's time (encoder, prefill, backbone step, depth head, detokenizer), the wall time "
    "and the real-time factor on stderr"};
constexpr OptionHelp kContext = {"--context N", "positions the conversation may hold (default 4096)"};

// Options each command lists; the parser in main.cc accepts exactly these names.
const std::vector<CommandHelp> kCommands = {
    {"detokenize",
     "audio codes -> 24 kHz speech with the detokenizer alone (LFM2.5-Audio, an LFM3-Audio codec, or Mimi)",
     "--model DIR --codes FILE -o OUT [options]",
     {{"--model DIR",
       "model directory (holding audio_detokenizer/) or the detokenizer folder; Kyutai's Mimi checkpoint or "
       "a "
       "folder with it (LFM2-Audio-1.5B)"},
      {"--codes FILE", "codes: text, one frame of 8 integers per line, or .npy [8, T]"},
      kOutput,
      kPcm,
      kThreads,
      kNoWeightCheck,
      {"--quiet", "no progress line on stderr"}},
     ""},
    {"tts",
     "text -> speech (sequential generation)",
     "--model DIR [--voice V] (TEXT | --file FILE) -o OUT [options]",
     {{"--model DIR", "the model directory"},
      {"--voice V",
       "\"US male\", \"US female\" (default), \"UK male\" or \"UK female\" (LFM2.5-Audio); "
       "LFM2-Audio: the voice described in words (default: none)"},
      {"TEXT", "what to say (one argument, one prompt)"},
      {"--file FILE",
       "a text of any length (- for stdin), spoken sentence by sentence into one stream: each sentence a "
       "fresh prompt in the same voice, 5 ms fades and 120 ms of silence at the joins"},
      kOutput,
      {"--seed S", "sampling seed (a run is reproducible)"},
      {"--temperature T", "audio sampling temperature (default 0.8; 0 = greedy)"},
      {"--top-k K", "audio top-k (default 64)"},
      {"--max-new N", "generation budget in tokens + frames (default 1024)"},
      kContext,
      kPcm,
      kThreads,
      kWeights,
      kNoWeightCheck,
      kVerbose,
      {"--quiet", "no summary line on stderr"}},
     ""},
    {"generate",
     "raw prompt -> one JSON line per generated item",
     "--model DIR --prompt FILE.json [options]",
     {{"--model DIR", "the model directory"},
      {"--prompt FILE",
       "segments: [{\"text\": \"...\"}, {\"ids\": [1, 6]}, {\"audio_out\": [[8 codes], ...]}, "
       "{\"audio\": \"file.wav\"}]"},
      {"--mode sequential|interleaved", "generation mode (default sequential)"},
      {"--max-new N", "generation budget (default 512)"},
      {"--seed S", "sampling seed"},
      {"--temperature T", "audio sampling temperature (greedy when not given)"},
      {"--top-k K", "audio top-k"},
      {"--text-temperature T", "text sampling temperature (greedy when not given)"},
      {"--text-top-k K", "text top-k"},
      {"-o, --output F", "also decode the speech into an audio file (containers as for tts -o)"},
      kContext,
      kPcm,
      kThreads,
      kWeights,
      kNoWeightCheck,
      kVerbose,
      {"--quiet", "no summary line on stderr"}},
     ""},
    {"asr",
     "speech -> text (prints the transcript)",
     "--model DIR FILE [options]",
     {{"--model DIR", "the model directory"},
      {"FILE", kAudioIn},
      {"--max-new N", "generation budget in tokens, per window"},
      {"--format text|json|srt|vtt",
       "output: text (a line per window, the default), json segments, SRT or WebVTT"},
      {"--words",
       "word timestamps (approximate: from the model's attention, aligned as Whisper's), in the json "
       "segments' \"words\" (json is then the default format)"},
      {"--max-seconds S", "longest input accepted (default 3600)"},
      {"--window S",
       "window length in seconds (default 30); cuts fall at the quietest 20 ms of its last 5 s"},
      kThreads,
      kWeights,
      kNoWeightCheck,
      kVerbose},
     ""},
    {"chat",
     "speech-to-speech (interleaved text and speech)",
     "--model DIR (--in QUESTION.wav --out REPLY.wav | --interactive --out-dir DIR) [options]",
     {{"--model DIR", "the model directory"},
      {"--in FILE", kAudioIn},
      {"--out F", "the spoken reply: an audio file (containers as for tts -o), or - for raw PCM on stdout"},
      {"--interactive",
       "one turn per stdin line (an audio file path or a line of text); the conversation is kept"},
      {"--out-dir DIR", "with --interactive: replies go to DIR/reply_N.wav"},
      {"--system TEXT", "system prompt (default \"Respond with interleaved text and audio.\")"},
      {"--seed S", "sampling seed"},
      {"--temperature T", "audio sampling temperature (default 1.0)"},
      {"--top-k K", "audio top-k (default 4)"},
      {"--max-new N", "generation budget per turn"},
      kContext,
      {"--context-policy stop|drop_oldest",
       "when the context fills: stop, or drop the oldest turns (system prompt kept) and go on (default: "
       "drop_oldest with --interactive on LFM2.5-Audio, else stop)"},
      kPcm,
      kThreads,
      kWeights,
      kNoWeightCheck,
      kVerbose},
     ""},
    {"quantize",
     "a Hugging Face snapshot -> Liquid's four-file GGUF release",
     "--model DIR --type TYPE --out OUTDIR",
     {{"--model DIR", "the snapshot"},
      {"--type f32|f16|bf16|q8_0|q4_0", "weight format of the matrices"},
      {"--out OUTDIR", "where the four files go"},
      {"--keep-f32 GLOB[,GLOB]", "tensors to keep in F32 anyway, by GGUF name (e.g. 'a.blk.*.conv_pw*')"}},
     "Every --model also takes such a folder, or the path of one of its files."},
    {"serve",
     "an OpenAI-compatible HTTP server: /v1/audio/speech, /v1/audio/transcriptions, /v1/chat/completions",
     "--model DIR [--host ADDR] [--port N] [options]",
     {{"--model DIR", "the model directory"},
      {"--host ADDR", "address to bind (default 127.0.0.1: this machine only)"},
      {"--port N", "port (default 8080; 0 picks a free one)"},
      {"--api-key KEY", "require 'Authorization: Bearer KEY' (or set LFMVOX_API_KEY)"},
      {"--api-key-file F", "the key, read from a file"},
      {"--max-sessions N", "sessions generating at once, batched together (default 4)"},
      {"--max-queued N", "requests waiting for a session (default 16)"},
      {"--max-body-mb N", "request body limit in MiB (default 32)"},
      {"--max-audio-seconds S", "longest uploaded clip (default 60)"},
      {"--max-new N", "cap on tokens + frames of every generation (default: each task's preset)"},
      {"--model-id ID", "the id /v1/models lists (default: the folder's name)"},
      kContext,
      kThreads,
      kWeights,
      kNoWeightCheck},
     ""},
    {"help", "this text; `lfmvox help CMD` or `lfmvox CMD --help`: one command", "[CMD]", {}, ""},
};

void AppendOptions(const CommandHelp& c, std::string* out) {
  for (const OptionHelp& o : c.options) {
    std::string line = "      ";
    line += o.flags;
    if (line.size() < 30) {
      line.resize(30, ' ');
    } else {
      line += "\n" + std::string(30, ' ');
    }
    *out += line + o.text + "\n";
  }
}

// roff text: backslashes and hyphens escaped, a line never starting with a control character.
std::string Roff(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\\') {
      out += "\\e";
    } else if (ch == '-') {
      out += "\\-";
    } else {
      out += ch;
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

}  // namespace

const std::vector<CommandHelp>& Commands() { return kCommands; }

const CommandHelp* FindCommand(std::string_view name) {
  for (const CommandHelp& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string VersionText() { return std::string("lfmvox ") + lfmvox::Version(); }

std::string UsageText() {
  std::string out =
      "usage: lfmvox <command> [options]\n"
      "       lfmvox <command> --help | lfmvox --version | lfmvox --man\n"
      "\n"
      "commands:\n";
  for (const CommandHelp& c : kCommands) {
    std::string head = "  ";
    head += c.name;
    head.resize(14, ' ');
    out += head + c.summary + "\n";
    AppendOptions(c, &out);
  }
  return out;
}

std::string CommandHelpText(const CommandHelp& c) {
  std::string out = std::string("usage: lfmvox ") + c.name + " " + c.synopsis + "\n\n" + c.summary + "\n";
  if (!c.options.empty()) {
    out += "\noptions:\n";
    AppendOptions(c, &out);
  }
  if (*c.notes) out += std::string("\n") + c.notes + "\n";
  return out;
}

std::string ManPage() {
  const std::string version = lfmvox::Version();
  std::string out = ".TH LFMVOX 1 \"\" \"lfmvox " + version + "\" \"User Commands\"\n";
  out += ".SH NAME\nlfmvox \\- speech in, text and speech out with Liquid AI's audio models\n";
  out += ".SH SYNOPSIS\n";
  for (const CommandHelp& c : kCommands) {
    out += ".B lfmvox " + Roff(c.name) + "\n" + Roff(c.synopsis) + "\n.br\n";
  }
  out += ".B lfmvox \\-\\-version\n.br\n.B lfmvox \\-\\-man\n";
  out +=
      ".SH DESCRIPTION\n"
      "A native inference engine for Liquid AI's audio models (LFM2.5\\-Audio, LFM3\\-Audio): text to "
      "speech, speech to text and speech to speech, on the CPU. DIR is a Hugging Face snapshot of the "
      "model as downloaded, or Liquid's GGUF release.\n";
  out += ".SH COMMANDS\n";
  for (const CommandHelp& c : kCommands) {
    out += ".SS " + Roff(c.name) + "\n" + Roff(c.summary) + "\n";
    for (const OptionHelp& o : c.options) {
      out += ".TP\n.B " + Roff(o.flags) + "\n" + Roff(o.text) + "\n";
    }
    if (*c.notes) out += ".PP\n" + Roff(c.notes) + "\n";
  }
  out +=
      ".SH EXIT STATUS\n"
      "0 on success, 1 when the work failed (the message says why), 2 on a usage error.\n"
      ".SH VERSION\n"
      "This page describes lfmvox " +
      version + ".\n";
  return out;
}

}  // namespace lfmvox_cli

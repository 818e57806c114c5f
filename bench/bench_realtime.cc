// N concurrent realtime conversations against an in-process `lfmvox serve` (apps/server), over loopback
// WebSockets with the OpenAI Realtime events, as clients send them: each client appends the spoken
// question (tests/data/inputs/question.wav, 4.9 s, resampled to 24 kHz PCM16), commits it and asks for a
// response; all N ask at the same moment, so the scheduler batches their steps. Per N it reports each
// stream's
//   - first_audio_s: from response.create to the first response.output_audio.delta (the question's
//     encoding and prefill included),
//   - rtf: from response.create to response.done ÷ the seconds of audio received,
//   - rtf_speaking: from the first audio delta to response.done ÷ the audio after the first delta (what
//     a listener waits on once the answer speaks; ≤ 1 means playback never starves),
// and the aggregate audio seconds received per wall second over all N streams, with the read rate
// (bench::MeasureReadBandwidth, the server's threads, "read_gb_s") taken while the server idles before
// each N: this minute's floor, since the machine's memory rate moves more than most changes.
//   bench_realtime [--model DIR] [--sessions 1,2,4,8] [--threads 2] [--max-new 48] [--json]
// DIR is a Hugging Face snapshot or a GGUF release; without it a random real-size LFM2.5-Audio checkpoint
// is written once to /tmp/lfmvox_bench_real. --json prints one line per (N, stream) and one per N.
// clang-format off
#include <utility>  // before Asio: its awaitable.hpp (Boost 1.74) uses std::exchange without including it
// clang-format on

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "codec_util.h"
#include "dsp/resample.h"
#include "lfmvox/audio_io.h"
#include "lfmvox/lfmvox.h"
#include "server.h"
#include "tools/checkpoint_gen.h"

using namespace lfmvox;
using bench::Now;
using json = nlohmann::json;
namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

struct Stream {
  double created = 0, first_audio = -1, done = 0;
  size_t audio_bytes = 0, first_chunk_bytes = 0;
  std::string status, error;
};

// One realtime conversation: session.created, turn detection off, the question appended and committed,
// then (at `go`) response.create and every event up to response.done.
void RunClient(uint16_t port, const std::string& question_b64, const std::atomic<double>* go, Stream* out) {
  try {
    net::io_context ioc;
    beast::websocket::stream<tcp::socket> ws(ioc);
    ws.next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    ws.handshake("127.0.0.1", "/v1/realtime");
    ws.read_message_max(64u << 20);
    auto send = [&](const json& e) { ws.write(net::buffer(e.dump())); };
    auto read = [&] {
      beast::flat_buffer b;
      ws.read(b);
      return json::parse(beast::buffers_to_string(b.data()), nullptr, false);
    };
    auto read_until = [&](const std::string& type) {
      json e;
      do {
        e = read();
        if (e.value("type", "") == "error") throw std::runtime_error(e.dump());
      } while (e.value("type", "") != type);
      return e;
    };
    read_until("session.created");
    send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", nullptr}}}}}}}});
    read_until("session.updated");
    send({{"type", "input_audio_buffer.append"}, {"audio", question_b64}});
    send({{"type", "input_audio_buffer.commit"}});
    read_until("conversation.item.created");
    while (Now() < go->load()) std::this_thread::yield();
    out->created = Now();
    send({{"type", "response.create"}});
    for (;;) {
      const json e = read();
      const std::string t = e.value("type", "");
      if (t == "error") throw std::runtime_error(e.dump());
      if (t == "response.output_audio.delta") {
        auto pcm = server::Base64Decode(e["delta"].get<std::string>(), 64u << 20);
        if (!pcm.ok()) throw std::runtime_error(pcm.status().ToString());
        if (out->first_audio < 0) {
          out->first_audio = Now();
          out->first_chunk_bytes = pcm->size();
        }
        out->audio_bytes += pcm->size();
      }
      if (t == "response.done") {
        out->done = Now();
        out->status = e["response"].value("status", "");
        break;
      }
    }
    ws.close(beast::websocket::close_code::normal);
  } catch (const std::exception& e) {
    out->error = e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, sessions_arg = "1,2,4,8";
  int threads = 2, max_new = 48;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--json") {
      as_json = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (k == "--model")
      dir = argv[++i];
    else if (k == "--sessions")
      sessions_arg = argv[++i];
    else if (k == "--threads")
      threads = std::max(1, std::atoi(argv[++i]));
    else if (k == "--max-new")
      max_new = std::max(8, std::atoi(argv[++i]));
  }
  const std::string src = LFMVOX_SOURCE_DIR;
  if (dir.empty()) {
    dir = "/tmp/lfmvox_bench_real";
    std::printf("using a random real-size LFM2.5-Audio checkpoint in %s (written once)\n", dir.c_str());
    Status s = tools::EnsureRealSizeModel(dir, src + "/tests/data/tokenizer/tokenizer.json");
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::ifstream f(src + "/tests/data/inputs/question.wav", std::ios::binary);
  const std::string wav((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto clip = DecodeAudio(wav, 60);
  if (!clip.ok()) {
    std::fprintf(stderr, "%s\n", clip.status().ToString().c_str());
    return 1;
  }
  auto pcm24 = dsp::Resample(clip->samples, clip->sample_rate, 24000);
  if (!pcm24.ok()) {
    std::fprintf(stderr, "%s\n", pcm24.status().ToString().c_str());
    return 1;
  }
  std::string s16;
  AppendPcmBytes(*pcm24, PcmFormat::kS16, &s16);
  const std::string question_b64 = server::Base64Encode(s16);

  std::vector<size_t> counts;
  for (const std::string& tok : bench::SplitList(sessions_arg))
    counts.push_back(std::max(1, std::atoi(tok.c_str())));
  server::ServerOptions o;
  o.model_dir = dir;
  o.port = 0;
  o.threads = threads;
  o.io_threads = 2;
  o.max_new_tokens = max_new;
  o.context = 2048;
  o.max_sessions = *std::max_element(counts.begin(), counts.end());
  auto server = server::Server::Start(o);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  if (Status s = (*server)->WaitReady(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const std::string format = bench::ModelFormat(dir), cpu = bench::CpuModel();
  const double bytes_per_s = 2.0 * 24000;
  for (size_t n : counts) {
    // This minute's read rate with the server's thread count, taken while the server is idle: the
    // machine's memory rate moves more than most changes, so each result carries its own.
    const double read_gbs = bench::MeasureReadGBs(threads);
    std::vector<Stream> streams(n);
    std::atomic<double> go{1e300};
    std::vector<std::thread> clients;
    for (size_t i = 0; i < n; ++i)
      clients.emplace_back(RunClient, (*server)->port(), std::cref(question_b64), &go, &streams[i]);
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + 50 * n));  // every client committed
    go.store(Now());
    for (auto& t : clients) t.join();
    double audio_s = 0, first = 1e300, last = 0;
    for (size_t i = 0; i < n; ++i) {
      const Stream& st = streams[i];
      if (!st.error.empty() || st.status != "completed" || st.first_audio < 0) {
        std::fprintf(stderr, "N=%zu stream %zu: status '%s', %s\n", n, i, st.status.c_str(),
                     st.error.empty() ? "no audio" : st.error.c_str());
        return 1;
      }
      const double secs = st.audio_bytes / bytes_per_s;
      const double after_first = (st.audio_bytes - st.first_chunk_bytes) / bytes_per_s;
      audio_s += secs;
      first = std::min(first, st.created);
      last = std::max(last, st.done);
      const double rtf = (st.done - st.created) / secs;
      const double rtf_speaking = after_first > 0 ? (st.done - st.first_audio) / after_first : 0;
      if (as_json) {
        std::printf(
            "{\"bench\":\"realtime_stream\",\"format\":\"%s\",\"threads\":%d,\"sessions\":%zu,\"stream\":%zu,"
            "\"cpu\":\"%s\",\"load\":%.2f,\"audio_s\":%.3f,\"first_audio_s\":%.3f,\"rtf\":%.3f,"
            "\"rtf_speaking\":%.3f}\n",
            format.c_str(), threads, n, i, cpu.c_str(), bench::LoadAverage(), secs,
            st.first_audio - st.created, rtf, rtf_speaking);
      } else {
        std::printf("N=%zu stream %zu: %.2f s of audio, first audio %.3f s, RTF %.3f (speaking %.3f)\n", n, i,
                    secs, st.first_audio - st.created, rtf, rtf_speaking);
      }
    }
    const double aggregate = audio_s / (last - first);
    if (as_json) {
      std::printf(
          "{\"bench\":\"realtime\",\"format\":\"%s\",\"threads\":%d,\"sessions\":%zu,\"cpu\":\"%s\",\"load\":"
          "%.2f,"
          "\"audio_s\":%.3f,\"wall_s\":%.3f,\"audio_s_per_s\":%.3f,\"read_gb_s\":%.2f}\n",
          format.c_str(), threads, n, cpu.c_str(), bench::LoadAverage(), audio_s, last - first, aggregate,
          read_gbs);
    } else {
      std::printf(
          "N=%zu: %.2f s of audio in %.2f s, %.3f audio seconds per second (%s, %d threads, %s; read %.1f "
          "GB/s)\n",
          n, audio_s, last - first, aggregate, format.c_str(), threads, cpu.c_str(), read_gbs);
    }
  }
  (*server)->Stop();
  return 0;
}

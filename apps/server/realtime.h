// GET /v1/realtime: the OpenAI Realtime API (GA event names) over a WebSocket. Each connection is one
// Conversation whose generations go through the scheduler (batched with every other request); a
// committed audio turn is answered by native speech-to-speech (interleaved generation). Audio is
// base64 PCM16 mono 24 kHz both ways. Every bad event gets an `error` event; the socket stays open.
// With turn_detection server_vad (vad.h) the server commits turns itself, answers them, and cancels a
// response the user talks over (barge-in), keeping in the history only the speech that was sent.
#pragma once

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp (Boost 1.74) uses std::exchange without including it
// clang-format on

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include "scheduler.h"
#include "server.h"

namespace lfmvox::server {

struct RealtimeContext {
  Scheduler* scheduler = nullptr;
  const ServerOptions* options = nullptr;
  std::atomic<size_t>* sessions = nullptr;  // open realtime sessions (capped at options->max_sessions)
  Metrics* metrics = nullptr;               // VAD turns and barge-ins
};

// Takes over the connection: accepts the upgrade `req` and serves the session until either side closes.
boost::asio::awaitable<void> ServeRealtime(boost::beast::tcp_stream& stream,
                                           boost::beast::http::request<boost::beast::http::string_body> req,
                                           RealtimeContext ctx);

}  // namespace lfmvox::server

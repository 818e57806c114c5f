// What the HTTP handlers (server.cc) and the realtime endpoint (realtime.cc) share on the wire.
#pragma once

#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>  // before Asio: its awaitable.hpp (Boost 1.74) uses std::exchange without including it

namespace lfmvox::server {

inline constexpr auto kAwait = boost::asio::use_awaitable;

// JSON text for a client: invalid UTF-8 in a string (a model's partial token) is replaced, never thrown.
inline std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lfmvox::server

// lfmvox-server OPTIONS (what `lfmvox serve OPTIONS` runs): parses the options, runs the server until
// SIGINT/SIGTERM. Returns the exit code.
#pragma once

namespace lfmvox::server {

int ServeMain(int argc, char** argv);

}  // namespace lfmvox::server

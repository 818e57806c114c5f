// lfmvox-server: the executable `lfmvox serve` runs (apps/cli), so that the CLI links none of the server's
// libraries.
#include "serve_main.h"

int main(int argc, char** argv) { return lfmvox::server::ServeMain(argc, argv); }

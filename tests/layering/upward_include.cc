// Must NOT compile: a kernel (lfmvox_ops) reaching up into a model family. The test
// layering.UpwardIncludeFails builds this file against lfmvox_ops alone and passes only when the
// build fails, proving that per-target include roots enforce the layering.
#include "models/lfm25_audio/session.h"

int main() { return 0; }

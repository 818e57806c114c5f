// Writing the files users name (audio, GGUF, .npy, safetensors, JSON): one
// policy for every writer, the way POSIX tools treat an output path.
//   - "-" is standard output.
//   - A symbolic link is followed: the file it names is written, the link stays.
//   - A regular file, or a path that does not exist yet, is replaced all or
//     nothing: the bytes grow in a uniquely named hidden file in the same
//     folder (mkstemp, so two runs never share one), which Commit flushes to
//     disk, gives the old file's mode (a new file: 0666 less the umask), renames
//     over the path and records in the folder. Readers see the old file or the
//     whole new one, never a part.
//   - A character or block device, a FIFO or standard output is written
//     through, never replaced: the bytes grow in an anonymous temporary file
//     (containers rewrite their headers, so writers need to seek) and Commit
//     copies them there. A FIFO is opened by Open, which waits for a reader as
//     a shell redirection does.
//   - A folder or a socket is an error.
//   - Every write, flush and close error (a full disk, /dev/full, a reader that
//     went away) is an error naming the path: the temporary file is removed and
//     an old file stays as it was. A reader that goes away raises no SIGPIPE.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lfmvox {

class OutputFile {
 public:
  static Result<OutputFile> Open(const std::string& path);

  OutputFile(OutputFile&& o) noexcept;
  OutputFile& operator=(OutputFile&& o) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // discards what was written unless Commit succeeded

  // The temporary file: seekable, read-write. A writer uses fd() or stream(),
  // not both (stream() buffers).
  int fd() const { return fd_; }
  FILE* stream();                                    // buffered over fd(); null when fdopen fails
  const std::string& path() const { return path_; }  // as given

  // Makes the bytes the output (see above). Once only; after an error the
  // output is discarded.
  Status Commit();
  // Removes the temporary file; the path stays as it was.
  void Discard();

 private:
  OutputFile() = default;

  std::string path_;    // as given, for messages
  std::string target_;  // the links followed: the file replaced or the device written
  std::string temp_;    // the hidden file beside target_ (empty when written through)
  int fd_ = -1;         // the temporary file
  int out_fd_ = -1;     // a device or FIFO written through (owned), or 1 (standard output)
  FILE* stream_ = nullptr;
  mode_t mode_ = 0;  // for the replacement
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool keep_owner_ = false;  // an existing file's owner and group are given to its replacement
};

// All of `bytes` as the file at `path`, under OutputFile's policy.
Status WriteWholeFile(const std::string& path, std::string_view bytes);
// The regular file `from` copied to `to`, under OutputFile's policy (in blocks: any size).
Status CopyWholeFile(const std::string& from, const std::string& to);

}  // namespace lfmvox

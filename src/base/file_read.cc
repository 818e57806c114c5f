#include "base/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lfmvox {

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string message = what + " " + path + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return NotFound(std::move(message));
  return IoError(std::move(message));
}

Result<OpenedFile> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It is cleared again
  // once fstat shows a regular file (where it has no effect anyway).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + " is not a regular file (a directory, device or pipe); pass a file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return OpenedFile{fd, static_cast<uint64_t>(st.st_size)};
}

Result<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  LFM_ASSIGN_OR_RETURN(const OpenedFile of, OpenRegularFile(path));
  const int fd = of.fd;
  if (of.size > max_bytes) {
    ::close(fd);
    return OutOfRange(StrFormat("%s is %llu bytes, more than the %llu this reader accepts", path.c_str(),
                                static_cast<unsigned long long>(of.size),
                                static_cast<unsigned long long>(max_bytes)));
  }
  std::string data(static_cast<size_t>(of.size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus("cannot read", path, err);
    }
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(done);
  return data;
}

}  // namespace lfmvox

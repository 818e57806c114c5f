#include "io/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
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
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + " is not a regular file");
  }
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

Result<MappedFile> MapReadOnly(const std::string& path) {
  LFM_ASSIGN_OR_RETURN(const OpenedFile of, OpenRegularFile(path));
  MappedFile m;
  m.size = static_cast<size_t>(of.size);
  if (m.size > 0) {
    void* p = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, of.fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(of.fd);
      return ErrnoStatus("cannot mmap", path, err);
    }
    m.data = p;
  }
  ::close(of.fd);  // the mapping keeps the file referenced
  return m;
}

}  // namespace lfmvox

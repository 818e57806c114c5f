#include "io/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lfmvox {

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

#include "base/file_write.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "base/file_read.h"

namespace lfmvox {
namespace {

// The links a path may pass through before it is refused (Linux's own limit).
constexpr int kMaxLinks = 40;

// The process's umask, without changing it (umask(2) can only be read by
// setting it, which would race with other threads creating files).
mode_t CurrentUmask() {
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned mask = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f) != nullptr) {
      found = std::sscanf(line, "Umask: %o", &mask) == 1;
    }
    std::fclose(f);
    if (found) return static_cast<mode_t>(mask & 0777);
  }
  return 022;
}

// Writes all of [p, p + n) to fd. Returns 0 or the errno of the failure; a
// reader that went away is EPIPE, with the SIGPIPE it raises blocked on this
// thread and consumed, whatever the process's disposition, so a library call
// never kills its host.
int WriteAll(int fd, const char* p, size_t n) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  sigset_t pending;
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  int err = 0;
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  if (err == EPIPE && !was_pending) {
    const timespec zero{};
    (void)sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return err;
}

Status WriteError(const std::string& path, int err) {
  if (err == EPIPE) return IoError("cannot write " + path + ": its reader went away before the end");
  return ErrnoStatus("cannot write", path, err);
}

// An anonymous read-write file in $TMPDIR (or /tmp): gone when closed.
int AnonymousFile() {
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/tmp";
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string name = dir + "/lfmvox-output-XXXXXX";  // a file system without O_TMPFILE
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(name.c_str());
  return fd;
}

}  // namespace

Result<OutputFile> OutputFile::Open(const std::string& path) {
  if (path.empty()) return InvalidArgument("an empty output path; give a file (or - for standard output)");
  OutputFile out;
  out.path_ = path;
  if (path == "-") {
    out.out_fd_ = STDOUT_FILENO;
    if ((out.fd_ = AnonymousFile()) < 0)
      return ErrnoStatus("cannot create a temporary file for", path, errno);
    return out;
  }
  // Follow the links to the file they name (a dangling one names a new file).
  namespace fs = std::filesystem;
  std::string target = path;
  struct stat st {};
  bool exists = false;
  for (int hops = 0;; ++hops) {
    if (::lstat(target.c_str(), &st) != 0) {
      if (errno != ENOENT) return ErrnoStatus("cannot stat", target, errno);
      break;
    }
    if (!S_ISLNK(st.st_mode)) {
      exists = true;
      break;
    }
    if (hops == kMaxLinks) return InvalidArgument(path + ": more than 40 symbolic links in a row (a loop?)");
    std::string link(4096, '\0');
    const ssize_t n = ::readlink(target.c_str(), link.data(), link.size());
    if (n < 0) return ErrnoStatus("cannot read the link", target, errno);
    link.resize(static_cast<size_t>(n));
    const fs::path to(link);
    target = to.is_absolute() ? link : (fs::path(target).parent_path() / to).string();
  }
  out.target_ = target;
  if (exists && S_ISDIR(st.st_mode)) {
    return InvalidArgument(path + " is a folder; give the file to write in it (or - for standard output)");
  }
  if (exists && S_ISSOCK(st.st_mode))
    return InvalidArgument(path + " is a socket; give a file, device or FIFO");
  if (exists && !S_ISREG(st.st_mode)) {  // a device or FIFO: written through
    out.out_fd_ = ::open(target.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (out.out_fd_ < 0) return ErrnoStatus("cannot open", path, errno);
    if ((out.fd_ = AnonymousFile()) < 0)
      return ErrnoStatus("cannot create a temporary file for", path, errno);
    return out;
  }
  if (exists) {
    // A file the caller may not write stays: replacing it through its folder would bypass its mode.
    if (::access(target.c_str(), W_OK) != 0) return ErrnoStatus("cannot write", path, errno);
    out.mode_ = st.st_mode & 07777;
    out.uid_ = st.st_uid;
    out.gid_ = st.st_gid;
    out.keep_owner_ = true;
  } else {
    out.mode_ = 0666 & ~CurrentUmask();
  }
  const fs::path t(target);
  std::string temp = (t.parent_path() / ("." + t.filename().string() + ".XXXXXX.partial")).string();
  out.fd_ = ::mkostemps(temp.data(), 8, O_CLOEXEC);
  if (out.fd_ < 0) {
    const int err = errno;
    const std::string dir = t.parent_path().empty() ? "." : t.parent_path().string();
    return ErrnoStatus("cannot create a file in", dir + " (for " + path + ")", err);
  }
  out.temp_ = std::move(temp);
  return out;
}

OutputFile::OutputFile(OutputFile&& o) noexcept
    : path_(std::move(o.path_)),
      target_(std::move(o.target_)),
      temp_(std::exchange(o.temp_, {})),
      fd_(std::exchange(o.fd_, -1)),
      out_fd_(std::exchange(o.out_fd_, -1)),
      stream_(std::exchange(o.stream_, nullptr)),
      mode_(o.mode_),
      uid_(o.uid_),
      gid_(o.gid_),
      keep_owner_(o.keep_owner_) {}

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    Discard();
    path_ = std::move(o.path_);
    target_ = std::move(o.target_);
    temp_ = std::exchange(o.temp_, {});
    fd_ = std::exchange(o.fd_, -1);
    out_fd_ = std::exchange(o.out_fd_, -1);
    stream_ = std::exchange(o.stream_, nullptr);
    mode_ = o.mode_;
    uid_ = o.uid_;
    gid_ = o.gid_;
    keep_owner_ = o.keep_owner_;
  }
  return *this;
}

OutputFile::~OutputFile() { Discard(); }

FILE* OutputFile::stream() {
  if (stream_ == nullptr && fd_ >= 0) stream_ = ::fdopen(fd_, "w+b");
  return stream_;
}

void OutputFile::Discard() {
  if (stream_ != nullptr) {
    std::fclose(std::exchange(stream_, nullptr));  // closes fd_ too
    fd_ = -1;
  }
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (out_fd_ > STDERR_FILENO) ::close(out_fd_);
  out_fd_ = -1;
  if (!temp_.empty()) ::unlink(std::exchange(temp_, {}).c_str());
}

Status OutputFile::Commit() {
  if (fd_ < 0) return InvalidArgument(path_ + " was not written (committed or discarded before)");
  Status st = Status::Ok();
  if (stream_ != nullptr && std::fflush(stream_) != 0) st = WriteError(path_, errno);
  if (st.ok() && temp_.empty()) {  // written through: copy the temporary file to the destination
    if (out_fd_ == STDOUT_FILENO) std::fflush(stdout);  // what the process printed comes first
    char buf[1 << 16];
    for (off_t at = 0; st.ok();) {
      const ssize_t n = ::pread(fd_, buf, sizeof buf, at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) st = ErrnoStatus("cannot read back the temporary file for", path_, errno);
      if (n <= 0) break;
      if (const int err = WriteAll(out_fd_, buf, static_cast<size_t>(n)); err != 0)
        st = WriteError(path_, err);
      at += n;
    }
    if (st.ok() && out_fd_ > STDERR_FILENO && ::close(std::exchange(out_fd_, -1)) != 0) {
      st = WriteError(path_, errno);
    }
    Discard();  // the temporary file (and on an error the destination) is left to close
    return st;
  }
  // Replacing a regular file: its mode (and, where permitted, owner), the data on disk, then the name.
  if (st.ok() && ::fchmod(fd_, mode_) != 0) st = ErrnoStatus("cannot set the mode of", temp_, errno);
  if (st.ok() && keep_owner_) (void)::fchown(fd_, uid_, gid_);  // only root may give a file away
  if (st.ok() && ::fsync(fd_) != 0 && errno != EINVAL) st = WriteError(path_, errno);
  if (st.ok()) {
    const int rc = stream_ != nullptr ? std::fclose(std::exchange(stream_, nullptr)) : ::close(fd_);
    fd_ = -1;
    if (rc != 0) st = WriteError(path_, errno);
  }
  if (st.ok() && std::rename(temp_.c_str(), target_.c_str()) != 0) {
    st = ErrnoStatus("cannot rename " + temp_ + " to", target_, errno);
  }
  if (!st.ok()) {
    Discard();
    return st;
  }
  temp_.clear();
  // The rename itself on disk. The file is already in place, so a folder that cannot be synced
  // (some network file systems) is no reason to report failure.
  const std::filesystem::path dir = std::filesystem::path(target_).parent_path();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteWholeFile(const std::string& path, std::string_view bytes) {
  LFM_ASSIGN_OR_RETURN(OutputFile out, OutputFile::Open(path));
  if (const int err = WriteAll(out.fd(), bytes.data(), bytes.size()); err != 0) return WriteError(path, err);
  return out.Commit();
}

Status CopyWholeFile(const std::string& from, const std::string& to) {
  LFM_ASSIGN_OR_RETURN(const OpenedFile in, OpenRegularFile(from));
  Result<OutputFile> out = OutputFile::Open(to);
  if (!out.ok()) {
    ::close(in.fd);
    return out.status();
  }
  std::vector<char> buf(size_t{1} << 20);
  Status st = Status::Ok();
  for (;;) {
    const ssize_t n = ::read(in.fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) st = ErrnoStatus("cannot read", from, errno);
    if (n <= 0) break;
    if (const int err = WriteAll(out->fd(), buf.data(), static_cast<size_t>(n)); err != 0) {
      st = WriteError(to, err);
      break;
    }
  }
  ::close(in.fd);
  return st.ok() ? out->Commit() : st;
}

}  // namespace lfmvox

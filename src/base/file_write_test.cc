// The output policy (base/file_write.h) on every kind of path: new and existing regular files, symlinks
// across folders, device nodes, /dev/full, FIFOs with a reader that stays or goes away, folders, sockets,
// and two writers racing to one path.
#include "base/file_write.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "io/test_util.h"

namespace lfmvox {
namespace {

namespace fs = std::filesystem;
using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 % 251);
  return s;
}

Status WriteVia(const std::string& path, const std::string& bytes, bool commit = true) {
  Result<OutputFile> out = OutputFile::Open(path);
  if (!out.ok()) return out.status();
  if (::write(out->fd(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    return IoError("short write to the temporary file");
  }
  return commit ? out->Commit() : Status::Ok();
}

// The names in `dir`: after any run only the outputs, never a temporary file.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

bool IsChar(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

TEST(OutputFile, NewFileAppearsWholeOnCommitWithTheUmasksMode) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("out.bin");
  const mode_t old_mask = ::umask(027);
  Result<OutputFile> out = OutputFile::Open(path);
  ::umask(old_mask);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::string bytes = Pattern(100000, 'a');
  ASSERT_EQ(::write(out->fd(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  EXPECT_FALSE(fs::exists(path)) << "nothing at the path before Commit";
  ASSERT_EQ(Names(dir.path()).size(), 1u);
  EXPECT_EQ(Names(dir.path())[0].front(), '.') << "the temporary file is hidden";
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_EQ(ReadBytes(path), bytes);
  EXPECT_EQ(ModeOf(path) & 07777, 0640u) << "0666 less the umask 027, as a shell's > would give";
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"out.bin"});
  EXPECT_FALSE(out->Commit().ok()) << "a second Commit has nothing to commit";
}

TEST(OutputFile, ExistingFileIsReplacedAllOrNothingAndKeepsItsMode) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("kept.wav");
  ASSERT_TRUE(WriteBytes(path, "old contents"));
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  // A run that fails: the old file stays, byte for byte, and no temporary file is left.
  ASSERT_TRUE(WriteVia(path, Pattern(5000, 'x'), /*commit=*/false).ok());
  EXPECT_EQ(ReadBytes(path), "old contents");
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"kept.wav"});
  // A run that succeeds.
  const std::string bytes = Pattern(5000, 'y');
  ASSERT_TRUE(WriteVia(path, bytes).ok());
  EXPECT_EQ(ReadBytes(path), bytes);
  EXPECT_EQ(ModeOf(path) & 07777, 0640u);
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"kept.wav"});
}

TEST(OutputFile, SymlinksAreFollowedAndStay) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  fs::create_directories(dir.File("a"));
  fs::create_directories(dir.File("b"));
  const std::string target = dir.File("a/target.wav");
  ASSERT_TRUE(WriteBytes(target, "old"));
  ASSERT_EQ(::chmod(target.c_str(), 0604), 0);
  // A relative link in another folder, reached through a second link.
  fs::create_symlink("../a/target.wav", dir.File("b/link.wav"));
  fs::create_symlink(dir.File("b/link.wav"), dir.File("outer.wav"));
  const std::string bytes = Pattern(3000, 'q');
  ASSERT_TRUE(WriteVia(dir.File("outer.wav"), bytes).ok());
  EXPECT_TRUE(fs::is_symlink(dir.File("outer.wav")));
  EXPECT_TRUE(fs::is_symlink(dir.File("b/link.wav")));
  EXPECT_EQ(ReadBytes(target), bytes);
  EXPECT_EQ(ModeOf(target) & 07777, 0604u);
  EXPECT_EQ(Names(dir.File("a")), std::vector<std::string>{"target.wav"}) << "written in the target's folder";
  EXPECT_EQ(Names(dir.File("b")), std::vector<std::string>{"link.wav"});
  // A dangling link names the file to create.
  fs::create_symlink("../a/new.wav", dir.File("b/dangling.wav"));
  ASSERT_TRUE(WriteVia(dir.File("b/dangling.wav"), "fresh").ok());
  EXPECT_TRUE(fs::is_symlink(dir.File("b/dangling.wav")));
  EXPECT_EQ(ReadBytes(dir.File("a/new.wav")), "fresh");
  // A loop is an error, not a hang.
  fs::create_symlink("loop2", dir.File("loop1"));
  fs::create_symlink("loop1", dir.File("loop2"));
  const Status loop = WriteVia(dir.File("loop1"), "x");
  EXPECT_EQ(loop.code(), StatusCode::kInvalidArgument) << loop.ToString();
}

TEST(OutputFile, DevicesAreWrittenThroughNeverReplaced) {
  ASSERT_TRUE(IsChar("/dev/null"));
  ASSERT_TRUE(WriteVia("/dev/null", Pattern(200000, 'n')).ok());
  EXPECT_TRUE(IsChar("/dev/null")) << "/dev/null is still a device";
  // A device node of our own (null's numbers, 1:3) in a scratch folder, where mknod is permitted (root).
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string node = dir.File("null");
  if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    ASSERT_TRUE(WriteVia(node, Pattern(1000, 'm')).ok());
    EXPECT_TRUE(IsChar(node)) << "the node is still a device";
    EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"null"});
  }
  // /dev/full: the write fails as a full disk does, and says so; the device stays.
  const Status full = WriteVia("/dev/full", Pattern(1000, 'f'));
  EXPECT_EQ(full.code(), StatusCode::kIo);
  EXPECT_NE(full.message().find("/dev/full"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find(std::strerror(ENOSPC)), std::string::npos) << full.message();
  EXPECT_TRUE(IsChar("/dev/full"));
}

TEST(OutputFile, FifoWithAReaderReceivesEveryByte) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string fifo = dir.File("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string bytes = Pattern(300000, 'p');  // more than a pipe's buffer
  std::string got;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    if (fd < 0) return;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fd);
  });
  const Status st = WriteVia(fifo, bytes);
  reader.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got, bytes);
  struct stat s {};
  ASSERT_EQ(::lstat(fifo.c_str(), &s), 0);
  EXPECT_TRUE(S_ISFIFO(s.st_mode)) << "the FIFO is still a FIFO";
}

TEST(OutputFile, AReaderThatGoesAwayIsAnErrorNotASignal) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string fifo = dir.File("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::signal(SIGPIPE, SIG_DFL), SIG_DFL) << "the default disposition would end the process";
  std::thread reader([&] {  // `| head -c 100`
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    if (fd < 0) return;
    char buf[100];
    size_t n = 0;
    while (n < sizeof buf) {
      const ssize_t r = ::read(fd, buf + n, sizeof buf - n);
      if (r <= 0) break;
      n += static_cast<size_t>(r);
    }
    ::close(fd);
  });
  const Status st = WriteVia(fifo, Pattern(1 << 20, 'h'));
  reader.join();
  EXPECT_EQ(st.code(), StatusCode::kIo);
  EXPECT_NE(st.message().find("reader went away"), std::string::npos) << st.message();
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "no SIGPIPE is left pending";
}

TEST(OutputFile, FoldersAndSocketsAreErrors) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const Status folder = WriteVia(dir.path(), "x");
  EXPECT_EQ(folder.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(folder.message().find("is a folder"), std::string::npos) << folder.message();
  const std::string sock = dir.File("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  const Status s = WriteVia(sock, "x");
  ::close(fd);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("socket"), std::string::npos) << s.message();
  const Status missing = WriteVia(dir.File("no/such/folder/x.wav"), "x");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find("no/such/folder"), std::string::npos) << missing.message();
}

TEST(OutputFile, TwoWritersToOnePathLeaveOneCompleteFile) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("model.gguf");
  const std::string a = Pattern(4 << 20, 'A'), b = Pattern(4 << 20, 'B');
  for (int round = 0; round < 4; ++round) {
    Status sa, sb;
    std::thread ta([&] { sa = WriteWholeFile(path, a); });
    std::thread tb([&] { sb = WriteWholeFile(path, b); });
    ta.join();
    tb.join();
    ASSERT_TRUE(sa.ok()) << sa.ToString();
    ASSERT_TRUE(sb.ok()) << sb.ToString();
    const std::string got = ReadBytes(path);
    EXPECT_TRUE(got == a || got == b) << "round " << round << ": " << got.size() << " bytes, a mix";
    EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"model.gguf"});
  }
}

}  // namespace
}  // namespace lfmvox

#include "kiln/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "core/digest.h"

namespace kiln {

Result<std::string> read_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return invalid_argument("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return io_error("cannot stat " + path + ": " + std::strerror(err));
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (true) {
    if (done == bytes.size()) bytes.resize(bytes.size() * 2 + 4096);  // file grew, or /proc
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return io_error("cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  bytes.resize(done);
  return bytes;
}

Status write_file(const std::string& path, std::string_view bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return io_error("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return io_error("cannot write " + path + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return io_error("cannot write " + path + ": " + std::strerror(errno));
  return Status();
}

std::string file_name_for_module(const std::string& module_name) {
  std::string readable;
  for (char c : module_name.substr(0, 48))
    readable += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  if (readable.empty()) readable = "module";
  return readable + "-" + sha256_hex(module_name).substr(0, 16);
}

}  // namespace kiln

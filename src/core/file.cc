#include "kiln/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/digest.h"
#include "core/tensor_memory.h"

namespace kiln {

namespace {

// Reads the file into `into` (its `capacity` is what stat said) and anything beyond that (the file
// grew, or /proc, whose files stat as empty) into `beyond`; returns the bytes in `into`.
Result<size_t> read_into(int fd, const std::string& path, char* into, size_t capacity,
                         std::string* beyond) {
  size_t done = 0;
  char probe[4096];
  while (true) {
    bool full = done == capacity;
    ssize_t n = full ? ::read(fd, probe, sizeof probe) : ::read(fd, into + done, capacity - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) return done;
    if (full) {
      beyond->append(probe, static_cast<size_t>(n));
    } else {
      done += static_cast<size_t>(n);
    }
  }
}

Result<int> open_for_reading(const std::string& path, size_t* size) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return invalid_argument("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return io_error("cannot stat " + path + ": " + std::strerror(err));
  }
  *size = static_cast<size_t>(st.st_size);
  return fd;
}

}  // namespace

Result<std::string> read_file(const std::string& path) {
  size_t size = 0;
  KILN_ASSIGN_OR_RETURN(int fd, open_for_reading(path, &size));
  std::string bytes(size, '\0'), beyond;
  Result<size_t> done = read_into(fd, path, bytes.data(), size, &beyond);
  close(fd);
  if (!done.ok()) return done.status();
  bytes.resize(*done);  // the file shrank
  bytes += beyond;
  return bytes;
}

Result<FileBytes> read_file_bytes(const std::string& path) {
  size_t size = 0;
  KILN_ASSIGN_OR_RETURN(int fd, open_for_reading(path, &size));
  char* block = static_cast<char*>(map_memory(size));
  if (block == nullptr) {
    close(fd);
    return resource_exhausted("cannot read " + path + ": out of memory for its " +
                              std::to_string(size) + " bytes");
  }
  std::shared_ptr<const char> owner(
      block, [size](const char* p) { unmap_memory(const_cast<char*>(p), size); });
  std::string beyond;
  Result<size_t> done = read_into(fd, path, block, size, &beyond);
  close(fd);
  if (!done.ok()) return done.status();
  if (beyond.empty()) return FileBytes{owner, *done};
  // It grew while being read: keep all of it.
  auto whole = std::make_shared<std::string>(block, *done);
  *whole += beyond;
  return FileBytes{std::shared_ptr<const char>(whole, whole->data()), whole->size()};
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

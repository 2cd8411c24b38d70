// The POSIX Env. Errors name the path and the OS error (e.g. "No space left on device").
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "kiln/env.h"
#include "kiln/file.h"

namespace kiln {
namespace {

Status os_error(const std::string& what, const std::string& path, int err) {
  return io_error(what + " " + path + ": " + std::strerror(err));
}

// Creates one directory, private to this user; an existing one is left as it is.
Status make_private_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return Status();
  return os_error("cannot create directory", path, errno);
}

class PosixFileLock : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override {
    flock(fd_, LOCK_UN);
    close(fd_);
  }

 private:
  int fd_;
};

class PosixEnv : public Env {
 public:
  Result<std::string> read_file(const std::string& path) override { return kiln::read_file(path); }

  Status write_file(const std::string& path, std::string_view data, bool sync) override {
    // Private to this user; never through a planted symlink; never into a file that exists (the
    // cache writes temp files with random names and renames or links them into place).
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return os_error("cannot create", path, errno);
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        close(fd);
        return os_error("cannot write", path, err);
      }
      done += static_cast<size_t>(n);
    }
    if (sync && fsync(fd) != 0) {
      int err = errno;
      close(fd);
      return os_error("cannot sync", path, err);
    }
    if (close(fd) != 0) return os_error("cannot write", path, errno);
    return Status();
  }

  // A new name is durable only once its directory is synced: without this an entry reported
  // stored could vanish after a power loss even though its bytes were synced.
  Status rename_file(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return os_error("cannot rename", from, errno);
    return sync_parent_directory(to);
  }

  Status link_file(const std::string& from, const std::string& to) override {
    if (::link(from.c_str(), to.c_str()) != 0) {
      if (errno == EEXIST) return already_exists(to + " exists");
      return os_error("cannot link", to, errno);
    }
    return sync_parent_directory(to);
  }

  static Status sync_parent_directory(const std::string& path) {
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return os_error("cannot open directory", dir, errno);
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    // Some filesystems cannot sync directories; the rename itself has happened.
    if (rc != 0 && err != EINVAL && err != EROFS) return os_error("cannot sync", dir, err);
    return Status();
  }

  Status remove_file(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return os_error("cannot remove", path, errno);
    return Status();
  }

  // Every directory it creates is 0700: the cache holds code this user will run.
  Status create_dirs(const std::string& path) override {
    if (path.empty()) return invalid_argument("cannot create a directory with an empty name");
    for (size_t slash = path.find('/', 1); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      if (path[slash - 1] == '/') continue;
      KILN_RETURN_IF_ERROR(make_private_directory(path.substr(0, slash)));
    }
    KILN_RETURN_IF_ERROR(make_private_directory(path));
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return os_error("cannot create directory", path, errno);
    if (!S_ISDIR(st.st_mode))
      return io_error("cannot create directory " + path + ": a file is in the way");
    return Status();
  }

  Result<std::vector<std::string>> list_dir(const std::string& path) override {
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return os_error("cannot list", path, errno);
    std::vector<std::string> names;
    while (dirent* e = readdir(dir)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(dir);
    return names;
  }

  bool file_exists(const std::string& path) override { return access(path.c_str(), F_OK) == 0; }

  Result<uint64_t> file_size(const std::string& path) override {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return os_error("cannot stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  Result<int64_t> mtime_micros(const std::string& path) override {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return os_error("cannot stat", path, errno);
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
  }

  Status set_mtime_micros(const std::string& path, int64_t micros) override {
    timespec times[2];
    times[0].tv_sec = 0;
    times[0].tv_nsec = UTIME_OMIT;  // leave atime alone
    times[1].tv_sec = micros / 1000000;
    times[1].tv_nsec = (micros % 1000000) * 1000;
    if (utimensat(AT_FDCWD, path.c_str(), times, 0) != 0)
      return os_error("cannot touch", path, errno);
    return Status();
  }

  Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) override {
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return os_error("cannot open lock", path, errno);
    while (flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return os_error("cannot lock", path, err);
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }

  Result<FileOwner> file_owner(const std::string& path, bool follow_symlinks) override {
    struct stat st {};
    int rc = follow_symlinks ? stat(path.c_str(), &st) : lstat(path.c_str(), &st);
    if (rc != 0) {
      if (errno == ENOENT) return not_found("no such file: " + path);
      return os_error("cannot stat", path, errno);
    }
    return FileOwner{static_cast<uint32_t>(st.st_uid), static_cast<uint32_t>(st.st_mode)};
  }

  uint32_t user_id() override { return static_cast<uint32_t>(geteuid()); }

  int64_t now_micros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  int process_id() override { return static_cast<int>(getpid()); }
};

}  // namespace

bool FileOwner::is_directory() const { return S_ISDIR(mode); }
bool FileOwner::is_regular() const { return S_ISREG(mode); }
bool FileOwner::is_symlink() const { return S_ISLNK(mode); }
bool FileOwner::writable_by_others() const { return (mode & (S_IWGRP | S_IWOTH)) != 0; }

Status check_trusted_path(Env* env, const std::string& path, bool follow_symlinks,
                          bool trust_shared) {
  if (trust_shared) return Status();
  KILN_ASSIGN_OR_RETURN(FileOwner owner, env->file_owner(path, follow_symlinks));
  const char* fix =
      "; kiln loads no code from it. Fix it with `chmod go-w` / `chown`, or set "
      "KILN_CACHE_TRUST_SHARED_DIR=true for a deliberately shared team cache";
  if (owner.is_symlink())
    return permission_denied(path + " is a symbolic link inside the cache" + fix);
  if (owner.uid != env->user_id() && owner.uid != 0)
    return permission_denied(path + " is owned by uid " + std::to_string(owner.uid) +
                             ", not by this user (uid " + std::to_string(env->user_id()) + ")" +
                             fix);
  if (owner.writable_by_others()) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", owner.mode & 07777);
    return permission_denied(path + " is writable by other users (mode " + mode + ")" + fix);
  }
  return Status();
}

Env* Env::posix() {
  static PosixEnv* env = new PosixEnv();
  return env;
}

}  // namespace kiln

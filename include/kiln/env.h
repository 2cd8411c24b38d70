// Env: every file, directory, lock, clock and process-id call the cache makes goes through here
// (as in LevelDB), so tests can inject ENOSPC, EIO, EACCES, torn writes, crashes and time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

// Held while alive; released by the destructor.
class KILN_EXPORT FileLock {
 public:
  virtual ~FileLock() = default;
};

// Who owns a file and who may write it (lstat/stat's st_uid and st_mode).
struct KILN_EXPORT FileOwner {
  uint32_t uid = 0;
  uint32_t mode = 0;  // st_mode: type and permission bits
  bool is_directory() const;
  bool is_regular() const;
  bool is_symlink() const;
  bool writable_by_others() const;  // group or world write permission
};

class KILN_EXPORT Env {
 public:
  virtual ~Env() = default;
  // The process-wide POSIX Env. Never deleted.
  static Env* posix();

  virtual Result<std::string> read_file(const std::string& path) = 0;
  // Creates `path` (0600; it must not exist yet, nor be a symlink) and writes `data`;
  // `sync` = fsync before returning. Callers write a fresh temp name and rename it into place.
  virtual Status write_file(const std::string& path, std::string_view data, bool sync) = 0;
  virtual Status rename_file(const std::string& from, const std::string& to) = 0;
  // Hard link; fails with kAlreadyExists when `to` exists (first writer wins).
  virtual Status link_file(const std::string& from, const std::string& to) = 0;
  virtual Status remove_file(const std::string& path) = 0;
  // Creates the missing directories of `path`, each 0700.
  virtual Status create_dirs(const std::string& path) = 0;
  virtual Result<std::vector<std::string>> list_dir(const std::string& path) = 0;
  virtual bool file_exists(const std::string& path) = 0;
  virtual Result<uint64_t> file_size(const std::string& path) = 0;
  // The modification time, which the cache sets itself to record last use.
  virtual Result<int64_t> mtime_micros(const std::string& path) = 0;
  virtual Status set_mtime_micros(const std::string& path, int64_t micros) = 0;
  // Exclusive advisory lock on `path` (created if missing), shared by threads and processes.
  virtual Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) = 0;
  // `follow_symlinks` = stat, else lstat (a symlink is then reported as one).
  virtual Result<FileOwner> file_owner(const std::string& path, bool follow_symlinks) = 0;
  // The effective user id files must belong to (root's files are trusted too).
  virtual uint32_t user_id() = 0;
  virtual int64_t now_micros() = 0;
  virtual int process_id() = 0;
};

// As ssh's StrictModes does for keys: kiln loads code only from a cache directory, and entries,
// that this user (or root) owns and no other user can write. Fails with kPermissionDenied naming
// the path, what is wrong and the fix. `trust_shared` (KILN_CACHE_TRUST_SHARED_DIR) accepts any.
KILN_EXPORT Status check_trusted_path(Env* env, const std::string& path, bool follow_symlinks,
                                      bool trust_shared);

// Forwards every call to another Env; override the calls a test wants to break.
class KILN_EXPORT EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Result<std::string> read_file(const std::string& p) override { return target_->read_file(p); }
  Status write_file(const std::string& p, std::string_view d, bool s) override {
    return target_->write_file(p, d, s);
  }
  Status rename_file(const std::string& f, const std::string& t) override {
    return target_->rename_file(f, t);
  }
  Status link_file(const std::string& f, const std::string& t) override {
    return target_->link_file(f, t);
  }
  Status remove_file(const std::string& p) override { return target_->remove_file(p); }
  Status create_dirs(const std::string& p) override { return target_->create_dirs(p); }
  Result<std::vector<std::string>> list_dir(const std::string& p) override {
    return target_->list_dir(p);
  }
  bool file_exists(const std::string& p) override { return target_->file_exists(p); }
  Result<uint64_t> file_size(const std::string& p) override { return target_->file_size(p); }
  Result<int64_t> mtime_micros(const std::string& p) override { return target_->mtime_micros(p); }
  Status set_mtime_micros(const std::string& p, int64_t m) override {
    return target_->set_mtime_micros(p, m);
  }
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& p) override {
    return target_->lock_file(p);
  }
  Result<FileOwner> file_owner(const std::string& p, bool follow) override {
    return target_->file_owner(p, follow);
  }
  uint32_t user_id() override { return target_->user_id(); }
  int64_t now_micros() override { return target_->now_micros(); }
  int process_id() override { return target_->process_id(); }

 protected:
  Env* target() const { return target_; }

 private:
  Env* target_;
};

}  // namespace kiln

// The one Env the tests use to control time and inject faults: it wraps the real POSIX Env and
// changes only what a test switches on, so every test exercises the real file code otherwise.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/env.h"
#include "kiln/status.h"

namespace kiln::testing {

class FaultEnv : public EnvWrapper {
 public:
  FaultEnv() : EnvWrapper(Env::posix()) {}

  // The clock reads `now` microseconds, then advances it by `step` (0: it stands still until the
  // test moves it).
  std::atomic<int64_t> now{1'000'000};
  std::atomic<int64_t> step{0};
  // Reading a cache entry (a path under /entries/) fails with an I/O error.
  std::atomic<bool> fail_entry_reads{false};
  // Writing a temporary entry file (under /tmp/, not the ledger's) fails as on a full disk, after
  // half of the data has reached the file (a torn write).
  std::atomic<bool> fail_entry_writes{false};
  // Every write fails as in a read-only directory.
  std::atomic<bool> deny_writes{false};
  // file_exists answers false: a writer's check misses the entry another writer has just made.
  std::atomic<bool> hide_existing_files{false};
  // Directory listings made so far.
  std::atomic<int> listings{0};

  // Makes `path` another user's file: a real chown when the tests run as root (CI does), else
  // file_owner reports it so.
  void make_foreign(const std::string& path) {
    if (geteuid() == 0) {
      ASSERT_EQ(chown(path.c_str(), kNobody, kNobody), 0) << path;
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      foreign_.push_back(path);
    }
  }
  static constexpr uint32_t kNobody = 65534;

  int64_t now_micros() override { return now.fetch_add(step) + step; }
  Result<std::string> read_file(const std::string& p) override {
    if (fail_entry_reads && p.find("/entries/") != std::string::npos)
      return io_error("cannot read " + p + ": Input/output error");
    return EnvWrapper::read_file(p);
  }
  Status write_file(const std::string& p, std::string_view data, bool sync) override {
    if (deny_writes) return io_error("cannot create " + p + ": Permission denied");
    if (fail_entry_writes && p.find("/tmp/") != std::string::npos &&
        p.find("ledger") == std::string::npos) {
      (void)EnvWrapper::write_file(p, data.substr(0, data.size() / 2), false);
      return io_error("cannot write " + p + ": No space left on device");
    }
    return EnvWrapper::write_file(p, data, sync);
  }
  bool file_exists(const std::string& p) override {
    return hide_existing_files ? false : EnvWrapper::file_exists(p);
  }
  Result<std::vector<std::string>> list_dir(const std::string& p) override {
    ++listings;
    return EnvWrapper::list_dir(p);
  }
  Result<FileOwner> file_owner(const std::string& p, bool follow) override {
    auto owner = EnvWrapper::file_owner(p, follow);
    std::lock_guard<std::mutex> lock(mutex_);
    if (owner.ok() && std::find(foreign_.begin(), foreign_.end(), p) != foreign_.end())
      owner->uid = kNobody;
    return owner;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> foreign_;
};

}  // namespace kiln::testing

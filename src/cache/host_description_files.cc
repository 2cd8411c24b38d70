#include "cache/host_description_files.h"

#include <xxhash.h>

#include <cstdio>
#include <sstream>

#include "cache/unique_suffix.h"
#include "kiln/env.h"
#include "kiln/file.h"
#include "kiln/logging.h"

namespace kiln {
namespace {

class HostDescriptionFiles : public cpu::HostDescriptionCache {
 public:
  HostDescriptionFiles(std::string directory, int writer_process, bool trust_shared)
      : directory_(std::move(directory)),
        writer_process_(writer_process),
        trust_shared_(trust_shared) {}

  std::optional<cpu::HostDescription> load(const std::string& identity) override {
    std::string path = path_of(identity);
    // A host file another user could have written is not believed: it decides what code is built.
    if (!check_trusted_path(env_, directory_ + "/hosts", false, trust_shared_).ok() ||
        !check_trusted_path(env_, path, false, trust_shared_).ok())
      return std::nullopt;
    Result<std::string> text = read_file(path);
    if (!text.ok()) return std::nullopt;
    std::istringstream lines(*text);
    std::string stored_identity;
    cpu::HostDescription d;
    if (std::getline(lines, stored_identity) && stored_identity == identity &&
        std::getline(lines, d.triple) && std::getline(lines, d.cpu) &&
        std::getline(lines, d.features) && !d.triple.empty() && !d.cpu.empty())
      return d;
    return std::nullopt;
  }

  // A fresh temp file in the cache's tmp/ (which gc clears of leftovers), synced before the rename
  // that publishes it. Without a writable directory the next process asks LLVM again.
  void save(const std::string& identity, const cpu::HostDescription& d,
            int process_index) override {
    if (process_index != writer_process_) return;
    std::string path = path_of(identity);
    std::string tmp = directory_ + "/tmp/host-" + unique_suffix(env_);
    std::string text = identity + "\n" + d.triple + "\n" + d.cpu + "\n" + d.features + "\n";
    if (env_->create_dirs(directory_ + "/hosts").ok() &&
        env_->write_file(tmp, text, /*sync=*/true).ok() && env_->rename_file(tmp, path).ok()) {
      log::debug("described this host for the cache in " + path);
    } else {
      (void)env_->remove_file(tmp);
    }
  }

 private:
  std::string path_of(const std::string& identity) const {
    char digest[17];
    std::snprintf(digest, sizeof(digest), "%016llx",
                  static_cast<unsigned long long>(XXH3_64bits(identity.data(), identity.size())));
    return directory_ + "/hosts/" + digest + ".txt";
  }

  std::string directory_;
  int writer_process_;
  bool trust_shared_;
  // Outlives any cache's (a test's) Env: the description is the process's, not one cache's.
  Env* env_ = Env::posix();
};

}  // namespace

std::shared_ptr<cpu::HostDescriptionCache> host_description_files(std::string directory,
                                                                  int writer_process,
                                                                  bool trust_shared_directory) {
  return std::make_shared<HostDescriptionFiles>(std::move(directory), writer_process,
                                                trust_shared_directory);
}

}  // namespace kiln

// A real redis-server on a free loopback port, started and stopped by the test.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kiln/kv_store.h"

namespace kiln::testing {

inline int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class RedisServer {
 public:
  // Starts redis-server (no persistence); `password` enables AUTH.
  explicit RedisServer(const std::string& password = "")
      : port_(free_loopback_port()), password_(password) {
    start();
  }
  ~RedisServer() { stop(); }

  void start() {
    std::vector<std::string> argv = {
        "redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
        "--save",       "",       "--appendonly",        "no"};
    if (!password_.empty()) argv.insert(argv.end(), {"--requirepass", password_});
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawnp(&pid_, "redis-server", &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    RedisAddress address = this->address();
    for (int i = 0; i < 200; ++i) {
      if (RedisKeyValueStore::connect(address, 200).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  RedisAddress address() const {
    RedisAddress a;
    a.port = port_;
    a.password = password_;
    return a;
  }
  std::string url() const {
    return "redis://" + (password_.empty() ? "" : ":" + password_ + "@") +
           "127.0.0.1:" + std::to_string(port_) + "/0";
  }
  int port() const { return port_; }

 private:
  int port_;
  std::string password_;
  pid_t pid_ = -1;
};

}  // namespace kiln::testing

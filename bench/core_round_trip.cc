// How long one cache line takes to go from one CPU to another and back: two threads, pinned to
// two CPUs, take turns incrementing a shared counter. On the 2-vCPU VMs kiln is measured on this
// changes from run to run (about 130 ns when the host places both vCPUs close, about 450 ns when
// far apart), and with it what a second thread gains: every kernel that reads what the other
// thread wrote pays it per line. Print it next to T=2 timings so they can be read in context.
//
//   build/bin/kiln_core_round_trip [CPU_A CPU_B]   (default: the first two this process may use)
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

constexpr long kRoundTrips = 1000000;

alignas(64) std::atomic<long> turn{0};

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Waits for the counter to reach each value of its own parity and passes it on.
void take_turns(long first) {
  for (long i = first; i < 2 * kRoundTrips; i += 2) {
    while (turn.load(std::memory_order_acquire) != i) {
    }
    turn.store(i + 1, std::memory_order_release);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int cpus[2] = {-1, -1};
  if (argc == 3) {
    cpus[0] = std::atoi(argv[1]);
    cpus[1] = std::atoi(argv[2]);
  } else if (argc == 1) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
      std::perror("sched_getaffinity");
      return 1;
    }
    for (int cpu = 0, found = 0; cpu < CPU_SETSIZE && found < 2; ++cpu)
      if (CPU_ISSET(cpu, &allowed)) cpus[found++] = cpu;
  } else {
    std::fprintf(stderr, "usage: %s [CPU_A CPU_B]\n", argv[0]);
    return 2;
  }
  if (cpus[1] < 0) {
    std::fprintf(stderr, "error: this process may use only one CPU; a round trip needs two\n");
    return 1;
  }
  std::thread other([&] {
    if (!pin_to(cpus[1])) std::fprintf(stderr, "warning: could not pin to CPU %d\n", cpus[1]);
    take_turns(1);
  });
  if (!pin_to(cpus[0])) std::fprintf(stderr, "warning: could not pin to CPU %d\n", cpus[0]);
  auto start = std::chrono::steady_clock::now();
  take_turns(0);
  other.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("CPU %d <-> CPU %d: cache line round trip %.0f ns\n", cpus[0], cpus[1],
              seconds / kRoundTrips * 1e9);
  return 0;
}

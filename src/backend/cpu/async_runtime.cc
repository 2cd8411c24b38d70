// kiln's thread pool, and the runtime functions that MLIR's async lowering calls. Compiled
// programs split their parallel loops into tasks (async-parallel-for, coroutines); these functions
// run the tasks on kiln's own pool. kiln provides them itself because Debian's
// libmlir_async_runtime.so pulls in libLLVM, which a process that only runs cached executables must
// not load.
//
// The pool holds KILN_NUM_THREADS - 1 workers: the thread that runs the program is the last one. It
// never sits idle while its loop has work: waiting for a group or token, it runs queued tasks
// itself, and only sleeps (on a condition variable, no spinning) when the queue is empty.
#include "backend/cpu/async_runtime.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kiln/config.h"

namespace kiln::cpu {
namespace {

using CoroHandle = void*;
using CoroResume = void (*)(void*);

struct Task {
  CoroHandle handle;
  CoroResume resume;
  void run() const { resume(handle); }
};

// One mutex and one condition variable for the queue and for every token and group: a thread
// waiting for its group must also wake when new tasks arrive (it runs them), and tasks are coarse
// (the compiler sizes them to thousands of operations), so one lock is not contended. Waking a
// sleeping thread costs a system call: only done when one sleeps.
class Pool {
 public:
  static Pool& get() {
    // Never destroyed: workers may still be asleep on it while the process exits.
    static Pool* pool = new Pool();
    return *pool;
  }

  int threads() {
    int wanted = configured_threads();
    std::lock_guard<std::mutex> lock(mutex_);
    resize_locked(wanted - 1);
    return wanted;
  }

  void submit(Task task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(task);
      changes_.fetch_add(1, std::memory_order_release);
    }
    wake_sleepers();
  }

  // Runs queued tasks until `done` holds (checked under the lock), sleeping while there are none.
  template <typename Done>
  void help_until(Done done) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done()) {
      if (queue_.empty()) {
        wait_for_change(lock);
        continue;
      }
      run_front_locked(lock);
    }
  }

  // Wakes everyone waiting: called when a token or group becomes ready.
  template <typename Change>
  void publish(Change change) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      change();
      changes_.fetch_add(1, std::memory_order_release);
    }
    wake_sleepers();
  }

  // Waits until every task that had started when it was called has returned. A task can still be
  // in its coroutine's last instructions after the run it belongs to has seen it complete: the
  // code it executes must stay mapped until then.
  void wait_for_started_tasks() {
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t horizon = next_ticket_;
    ++quiescers_;
    changed_.wait(lock, [&] { return running_.empty() || *running_.begin() >= horizon; });
    --quiescers_;
  }

  std::mutex& mutex() { return mutex_; }

 private:
  static int available_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
  }

  static int configured_threads() {
    static const int cpus = available_cpus();
    int64_t asked = config::get_int("KILN_NUM_THREADS");
    return asked > 0 ? static_cast<int>(asked) : cpus;
  }

  void resize_locked(int workers) {
    wanted_workers_ = workers;
    if (static_cast<int>(alive_.size()) < workers) alive_.resize(workers, false);
    for (int i = 0; i < workers; ++i) {
      if (alive_[i]) continue;
      alive_[i] = true;
      std::thread([this, i] { work(i); }).detach();
    }
    // Workers beyond the count notice on their next wake-up.
    if (workers < static_cast<int>(alive_.size())) {
      changes_.fetch_add(1, std::memory_order_release);
      changed_.notify_all();
    }
  }

  void wake_sleepers() {
    if (sleepers_.load(std::memory_order_acquire) > 0) changed_.notify_all();
  }

  // With the lock held and the queue not empty: runs its first task without the lock.
  void run_front_locked(std::unique_lock<std::mutex>& lock) {
    Task task = queue_.front();
    queue_.pop_front();
    uint64_t ticket = next_ticket_++;
    running_.insert(ticket);
    lock.unlock();
    task.run();
    lock.lock();
    running_.erase(ticket);
    if (quiescers_ > 0) changed_.notify_all();
  }

  // With the lock held and nothing to do: watch for a change (a task queued, a token or group
  // completed) for a moment without the lock, then sleep on the condition variable. The moment
  // covers the gap between one parallel loop of a run and the next, which is far shorter than a
  // sleep and a wake-up; after it nothing spins. Returns with the lock held, after a change or a
  // spurious wake-up (the caller checks again).
  void wait_for_change(std::unique_lock<std::mutex>& lock) {
    constexpr auto kWatch = std::chrono::microseconds(100);
    uint64_t seen = changes_.load(std::memory_order_acquire);
    lock.unlock();
    auto until = std::chrono::steady_clock::now() + kWatch;
    for (int polls = 1; changes_.load(std::memory_order_acquire) == seen; ++polls) {
      if (polls % 64 == 0 && std::chrono::steady_clock::now() > until) break;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#else
      std::this_thread::yield();
#endif
    }
    lock.lock();
    if (changes_.load(std::memory_order_acquire) != seen) return;
    sleepers_.fetch_add(1, std::memory_order_relaxed);
    changed_.wait(lock, [&] { return changes_.load(std::memory_order_acquire) != seen; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

  void work(int index) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (index >= wanted_workers_) {
        alive_[index] = false;
        return;
      }
      if (queue_.empty()) {
        wait_for_change(lock);
        continue;
      }
      run_front_locked(lock);
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  // Counts changes (made under the mutex) so waiters can watch for one without taking it.
  std::atomic<uint64_t> changes_{0};
  std::atomic<int> sleepers_{0};  // threads asleep on `changed_` (changed under the mutex)
  // Tasks being run, by the ticket each got when it started (guarded by the mutex).
  uint64_t next_ticket_ = 0;
  std::set<uint64_t> running_;
  int quiescers_ = 0;
  std::deque<Task> queue_;
  std::vector<bool> alive_;
  int wanted_workers_ = 0;
};

// Tokens, values and groups are reference counted by the generated code. A group starts with one
// reference (its creator's); a token or value with two, as in MLIR's async runtime: one for the
// code that awaits it, one for the task that completes it, dropped when the task emplaces it.
struct RefCounted {
  enum class Kind { kToken, kValue, kGroup } kind;
  std::atomic<int64_t> references;
  explicit RefCounted(Kind k) : kind(k), references(k == Kind::kGroup ? 1 : 2) {}
};

enum class State { kPending, kReady, kError };

// Their states and waiter lists are guarded by the pool's mutex.
struct AsyncToken : RefCounted {
  AsyncToken() : RefCounted(Kind::kToken) {}
  State state = State::kPending;
  std::vector<Task> waiting_tasks;
  std::vector<struct AsyncGroup*> waiting_groups;
};

struct AsyncValue : RefCounted {
  explicit AsyncValue(int64_t size)
      : RefCounted(Kind::kValue),
        storage(static_cast<std::byte*>(std::aligned_alloc(64, round_up(size)))) {}
  ~AsyncValue() { std::free(storage); }
  static size_t round_up(int64_t size) {
    return size <= 0 ? 64 : (static_cast<size_t>(size) + 63) / 64 * 64;
  }
  State state = State::kPending;
  std::byte* storage;
  std::vector<Task> waiting_tasks;
};

struct AsyncGroup : RefCounted {
  AsyncGroup() : RefCounted(Kind::kGroup) {}
  int64_t pending = 0;
  int64_t added = 0;
  bool error = false;
  std::vector<Task> waiting_tasks;
};

void destroy(RefCounted* object) {
  switch (object->kind) {
    case RefCounted::Kind::kToken:
      delete static_cast<AsyncToken*>(object);
      break;
    case RefCounted::Kind::kValue:
      delete static_cast<AsyncValue*>(object);
      break;
    case RefCounted::Kind::kGroup:
      delete static_cast<AsyncGroup*>(object);
      break;
  }
}

// With the pool's mutex held: one token of `group` is done.
void token_done_locked(AsyncGroup* group, bool error, std::vector<Task>& to_submit) {
  if (error) group->error = true;
  if (--group->pending == 0) {
    to_submit.insert(to_submit.end(), group->waiting_tasks.begin(), group->waiting_tasks.end());
    group->waiting_tasks.clear();
  }
}

void drop_references(RefCounted* object, int64_t count) {
  if (object->references.fetch_sub(count, std::memory_order_acq_rel) == count) destroy(object);
}

void finish_token(AsyncToken* token, State state) {
  std::vector<Task> to_submit;
  std::vector<AsyncGroup*> groups;
  Pool& pool = Pool::get();
  pool.publish([&] {
    token->state = state;
    to_submit = std::move(token->waiting_tasks);
    token->waiting_tasks.clear();
    groups = std::move(token->waiting_groups);
    token->waiting_groups.clear();
    for (AsyncGroup* group : groups) token_done_locked(group, state == State::kError, to_submit);
  });
  for (const Task& t : to_submit) pool.submit(t);
  // Each group this token was added to was kept alive for it.
  for (AsyncGroup* group : groups) drop_references(group, 1);
  // The completing task's own reference.
  drop_references(token, 1);
}

void finish_value(AsyncValue* value, State state) {
  std::vector<Task> to_submit;
  Pool& pool = Pool::get();
  pool.publish([&] {
    value->state = state;
    to_submit = std::move(value->waiting_tasks);
    value->waiting_tasks.clear();
  });
  for (const Task& t : to_submit) pool.submit(t);
  drop_references(value, 1);
}

// Queues `task` now, or, while `pending()` holds (checked under the pool's mutex), adds it to
// `waiting` for whoever completes the object to queue.
template <typename Pending>
void execute_when_ready(Pending pending, std::vector<Task>& waiting, Task task) {
  Pool& pool = Pool::get();
  {
    std::lock_guard<std::mutex> lock(pool.mutex());
    if (pending()) {
      waiting.push_back(task);
      return;
    }
  }
  pool.submit(task);
}

}  // namespace

void wait_for_started_tasks() { Pool::get().wait_for_started_tasks(); }

}  // namespace kiln::cpu

using kiln::cpu::AsyncGroup;
using kiln::cpu::AsyncToken;
using kiln::cpu::AsyncValue;
using kiln::cpu::Pool;
using kiln::cpu::RefCounted;
using kiln::cpu::State;
using kiln::cpu::Task;

#define KILN_RUNTIME_EXPORT extern "C" __attribute__((visibility("default")))

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeAddRef(void* object, int64_t count) {
  static_cast<RefCounted*>(object)->references.fetch_add(count, std::memory_order_relaxed);
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeDropRef(void* object, int64_t count) {
  kiln::cpu::drop_references(static_cast<RefCounted*>(object), count);
}

KILN_RUNTIME_EXPORT AsyncToken* mlirAsyncRuntimeCreateToken() { return new AsyncToken(); }

KILN_RUNTIME_EXPORT AsyncValue* mlirAsyncRuntimeCreateValue(int64_t size) {
  return new AsyncValue(size);
}

KILN_RUNTIME_EXPORT AsyncGroup* mlirAsyncRuntimeCreateGroup(int64_t /*size*/) {
  return new AsyncGroup();
}

KILN_RUNTIME_EXPORT int64_t mlirAsyncRuntimeAddTokenToGroup(AsyncToken* token, AsyncGroup* group) {
  std::lock_guard<std::mutex> lock(Pool::get().mutex());
  int64_t rank = group->added++;
  if (token->state == State::kPending) {
    ++group->pending;
    group->references.fetch_add(1, std::memory_order_relaxed);
    token->waiting_groups.push_back(group);
  } else if (token->state == State::kError) {
    group->error = true;
  }
  return rank;
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeEmplaceToken(AsyncToken* token) {
  kiln::cpu::finish_token(token, State::kReady);
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeEmplaceValue(AsyncValue* value) {
  kiln::cpu::finish_value(value, State::kReady);
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeSetTokenError(AsyncToken* token) {
  kiln::cpu::finish_token(token, State::kError);
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeSetValueError(AsyncValue* value) {
  kiln::cpu::finish_value(value, State::kError);
}

KILN_RUNTIME_EXPORT bool mlirAsyncRuntimeIsTokenError(AsyncToken* token) {
  std::lock_guard<std::mutex> lock(Pool::get().mutex());
  return token->state == State::kError;
}

KILN_RUNTIME_EXPORT bool mlirAsyncRuntimeIsValueError(AsyncValue* value) {
  std::lock_guard<std::mutex> lock(Pool::get().mutex());
  return value->state == State::kError;
}

KILN_RUNTIME_EXPORT bool mlirAsyncRuntimeIsGroupError(AsyncGroup* group) {
  std::lock_guard<std::mutex> lock(Pool::get().mutex());
  return group->error;
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeAwaitToken(AsyncToken* token) {
  Pool::get().help_until([&] { return token->state != State::kPending; });
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeAwaitValue(AsyncValue* value) {
  Pool::get().help_until([&] { return value->state != State::kPending; });
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeAwaitAllInGroup(AsyncGroup* group) {
  Pool::get().help_until([&] { return group->pending == 0; });
}

KILN_RUNTIME_EXPORT std::byte* mlirAsyncRuntimeGetValueStorage(AsyncValue* value) {
  return value->storage;
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeExecute(void* handle, void (*resume)(void*)) {
  Pool::get().submit(Task{handle, resume});
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeAwaitTokenAndExecute(AsyncToken* token, void* handle,
                                                              void (*resume)(void*)) {
  kiln::cpu::execute_when_ready([&] { return token->state == State::kPending; },
                                token->waiting_tasks, Task{handle, resume});
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeAwaitValueAndExecute(AsyncValue* value, void* handle,
                                                              void (*resume)(void*)) {
  kiln::cpu::execute_when_ready([&] { return value->state == State::kPending; },
                                value->waiting_tasks, Task{handle, resume});
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimeAwaitAllInGroupAndExecute(AsyncGroup* group, void* handle,
                                                                   void (*resume)(void*)) {
  kiln::cpu::execute_when_ready([&] { return group->pending != 0; }, group->waiting_tasks,
                                Task{handle, resume});
}

// (The missing 'e' is MLIR's spelling: generated code calls this name.)
// The workers besides the thread that runs the program (KILN_NUM_THREADS - 1). kiln's generated
// code splits a parallel loop into one share per thread (parallel_loops.cc), and into one block,
// called directly with no task, tokens or queue, when there is none: one thread runs its loops as
// plain code (mobilenet_v2 at T=1: 7.4 -> 5.6 ms, docs/BENCHMARKS.md session 18).
KILN_RUNTIME_EXPORT int64_t mlirAsyncRuntimGetNumWorkerThreads() {
  return Pool::get().threads() - 1;
}

KILN_RUNTIME_EXPORT void mlirAsyncRuntimePrintCurrentThreadId() {
  std::printf("Current thread id: %zu\n", std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

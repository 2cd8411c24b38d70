#include "compiler_cpu/crash_recovery.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <mutex>

#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/ErrorHandling.h"

namespace kiln::cpu {
namespace {

// LLVM's message of the fatal error that ended the recovering call. Not thread_local: a TLS
// block in this dlopen'ed library trips LeakSanitizer's thread scan at exit, and the compiler's
// calls are one at a time anyway (ModuleCompiler's mutex).
std::atomic<std::string*> fatal_message{nullptr};
std::atomic<bool> recovery_ended{false};

void write_stderr(const char* text) {
  size_t left = strlen(text);
  while (left > 0) {
    ssize_t written = write(2, text, left);
    if (written <= 0) return;
    text += written;
    left -= static_cast<size_t>(written);
  }
}

// LLVM calls this for report_fatal_error; returning lets LLVM abort or exit the process.
void on_llvm_fatal_error(void*, const char* reason, bool) {
  llvm::CrashRecoveryContext* context = llvm::CrashRecoveryContext::GetCurrent();
  if (context && !recovery_ended.load()) {
    if (std::string* message = fatal_message.load()) {
      *message = reason;
      while (!message->empty() && isspace(static_cast<unsigned char>(message->back())))
        message->pop_back();
    }
    context->HandleExit(1);  // does not return: resumes after RunSafely
  }
  write_stderr("LLVM ERROR: ");
  write_stderr(reason);
  write_stderr("\n");
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::install_fatal_error_handler(on_llvm_fatal_error, nullptr);
    llvm::CrashRecoveryContext::Enable();
  });
}

std::string signal_text(int return_code) {
  // RunSafely reports a signal as 128 + its number.
  int signal_number = return_code - 128;
  if (signal_number <= 0 || signal_number >= NSIG) return "code " + std::to_string(return_code);
  const char* name = sigabbrev_np(signal_number);
  return std::string("signal ") + std::to_string(signal_number) +
         (name ? std::string(" (SIG") + name + ")" : "");
}

}  // namespace

Status run_recovering_from_crashes(const std::string& source_name, const std::string& stage,
                                   const std::function<void()>& work) {
  install_handlers();
  std::string message;
  fatal_message.store(&message);
  llvm::CrashRecoveryContext context;
  bool finished = context.RunSafely([&] { work(); });
  fatal_message.store(nullptr);
  if (finished) return Status::ok_status();
  std::string what = message.empty() ? "LLVM or MLIR crashed (" + signal_text(context.RetCode) +
                                           ") while " + stage + " this module"
                                     : "LLVM failed while " + stage + " this module: " + message;
  return compile_error(source_name + ": error: " + what +
                       "\nNothing was cached and this process carries on. This is a limitation of "
                       "LLVM 22 or of kiln's use of it: try another effort level (-O0..-O3) or "
                       "target, and please report the input.");
}

void end_crash_recovery_in_child() {
  recovery_ended.store(true);
  llvm::CrashRecoveryContext::Disable();
}

}  // namespace kiln::cpu

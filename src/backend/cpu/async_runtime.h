// kiln's thread pool, seen from the rest of libkiln (the generated code reaches it through the
// mlirAsyncRuntime* functions).
#pragma once

namespace kiln::cpu {

// Returns once every pool task that had started when it was called has returned. Call before
// unloading an executable's code: a task may still be leaving a coroutine of it after the run
// that spawned it has completed.
void wait_for_started_tasks();

}  // namespace kiln::cpu

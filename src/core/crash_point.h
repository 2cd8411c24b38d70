// Named points where a crash test can stop the process.
#pragma once

namespace kiln {

// When KILN_CRASH_AT_STEP names `step`, the process kills itself here with SIGKILL (no
// destructors, no buffered output: as a power cut or the kernel's OOM killer would), so a test
// stops a writer at an exact point instead of after a guessed sleep. Otherwise nothing happens.
//
// Steps: "cache-put:temp-written" (an entry's bytes are synced to a temp file, not yet linked
// in), "cache-put:linked" (the entry is visible, the ledger not yet updated),
// "cache-ledger:temp-written" (a new ledger is synced to a temp file, not yet renamed over the
// old one), "job-share:compiled" (a job's leader compiled, its followers not yet told).
void crash_point(const char* step);

}  // namespace kiln

// What libkiln exports: it is built with hidden visibility, so only what the public headers mark
// KILN_EXPORT (and the C functions generated code calls) is visible to programs that link it.
#pragma once

#define KILN_EXPORT __attribute__((visibility("default")))

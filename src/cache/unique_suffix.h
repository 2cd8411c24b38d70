// Temp-file names no other thread or process of the cache picks: writers create a fresh temp file,
// sync it, then publish it with one rename or link.
#pragma once

#include <random>
#include <string>

#include "kiln/env.h"

namespace kiln {

inline std::string unique_suffix(Env* env) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return std::to_string(env->process_id()) + "-" + std::to_string(rng());
}

}  // namespace kiln

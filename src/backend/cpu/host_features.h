// Which x86 features (in LLVM's names) this machine has, from cpuid and xgetbv, without LLVM.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace kiln::cpu {

// Features kiln can check; requirements outside this list cannot be verified and are ignored.
const std::set<std::string>& checkable_features();
// The checkable features this CPU has and the OS enables (AVX/AVX-512 state saved by the kernel).
const std::set<std::string>& host_features();
// "+a,-b,+c" → the "+" features in checkable_features() that the host lacks.
std::vector<std::string> missing_features(const std::string& llvm_feature_string);

}  // namespace kiln::cpu

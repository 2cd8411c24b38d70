#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/digest.h"
#include "kiln/config.h"
#include "kiln/pgle.h"

namespace kiln {
namespace {

constexpr char kProfileMagic[8] = {'K', 'I', 'L', 'N', 'P', 'R', 'O', 'F'};

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_string(std::string& out, const std::string& s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

// Bounds-checked little-endian reader; any overrun marks the input as damaged.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool ok() const { return ok_; }
  uint64_t u(int width) {
    if (!ok_ || bytes_.size() - pos_ < size_t(width)) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < width; ++i)
      v |= uint64_t(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += width;
    return v;
  }
  std::string str() {
    uint64_t n = u(4);
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  size_t position() const { return pos_; }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace

std::string format_duration_ns(int64_t ns) {
  char text[32];
  if (ns < 0) return "-";
  if (ns < 10'000)
    std::snprintf(text, sizeof(text), "%lld ns", static_cast<long long>(ns));
  else if (ns < 10'000'000)
    std::snprintf(text, sizeof(text), "%.1f us", ns / 1e3);
  else
    std::snprintf(text, sizeof(text), "%.2f ms", ns / 1e6);
  return text;
}

int KernelProfile::best_candidate() const {
  int best = -1;
  for (size_t c = 0; c < candidate_ns.size(); ++c)
    if (candidate_ns[c] != kNotMeasured && (best < 0 || candidate_ns[c] < candidate_ns[best]))
      best = static_cast<int>(c);
  return best;
}

int64_t KernelProfile::best_ns() const {
  int best = best_candidate();
  return best < 0 ? 0 : candidate_ns[best];
}

int64_t FdoProfile::total_ns() const {
  int64_t total = 0;
  for (const KernelProfile& k : kernels) total += k.best_ns();
  return total;
}

const KernelProfile* FdoProfile::find(uint64_t fingerprint) const {
  auto it =
      std::lower_bound(kernels.begin(), kernels.end(), fingerprint,
                       [](const KernelProfile& k, uint64_t fp) { return k.fingerprint < fp; });
  return it != kernels.end() && it->fingerprint == fingerprint ? &*it : nullptr;
}

std::string encode_fdo_profile(const FdoProfile& profile) {
  std::vector<const KernelProfile*> sorted;
  for (const KernelProfile& k : profile.kernels) sorted.push_back(&k);
  std::sort(sorted.begin(), sorted.end(), [](const KernelProfile* a, const KernelProfile* b) {
    return a->fingerprint < b->fingerprint;
  });
  std::string out(kProfileMagic, sizeof(kProfileMagic));
  put_u32(out, kProfileFormatVersion);
  put_u32(out, profile.percentile);
  put_u32(out, profile.runs);
  put_u32(out, static_cast<uint32_t>(sorted.size()));
  for (const KernelProfile* k : sorted) {
    put_u64(out, k->fingerprint);
    put_u32(out, k->samples);
    put_string(out, k->name);
    put_u32(out, static_cast<uint32_t>(k->candidate_ns.size()));
    for (size_t c = 0; c < k->candidate_ns.size(); ++c) {
      put_string(out, c < k->candidate_names.size() ? k->candidate_names[c] : "");
      put_u64(out, static_cast<uint64_t>(k->candidate_ns[c]));
    }
  }
  put_u64(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

Result<FdoProfile> decode_fdo_profile(std::string_view bytes) {
  if (bytes.size() < sizeof(kProfileMagic) ||
      std::memcmp(bytes.data(), kProfileMagic, sizeof(kProfileMagic)) != 0)
    return invalid_argument("not a kiln PGLE profile (bad magic)");
  Reader r(bytes.substr(sizeof(kProfileMagic)));
  uint32_t version = static_cast<uint32_t>(r.u(4));
  if (r.ok() && version != kProfileFormatVersion)
    return invalid_argument("kiln PGLE profile format version " + std::to_string(version) +
                            " is not supported (this kiln reads version " +
                            std::to_string(kProfileFormatVersion) + "); profile the program again");
  if (bytes.size() < sizeof(kProfileMagic) + 8 ||
      XXH3_64bits(bytes.data(), bytes.size() - 8) != Reader(bytes.substr(bytes.size() - 8)).u(8))
    return corruption("kiln PGLE profile checksum mismatch: the profile is damaged");
  FdoProfile p;
  p.percentile = static_cast<uint32_t>(r.u(4));
  p.runs = static_cast<uint32_t>(r.u(4));
  uint64_t count = r.u(4);
  for (uint64_t i = 0; r.ok() && i < count; ++i) {
    KernelProfile k;
    k.fingerprint = r.u(8);
    k.samples = static_cast<uint32_t>(r.u(4));
    k.name = r.str();
    uint64_t candidates = r.u(4);
    for (uint64_t c = 0; r.ok() && c < candidates; ++c) {
      k.candidate_names.push_back(r.str());
      k.candidate_ns.push_back(static_cast<int64_t>(r.u(8)));
    }
    if (!p.kernels.empty() && p.kernels.back().fingerprint >= k.fingerprint)
      return corruption("kiln PGLE profile is damaged: kernels out of order");
    p.kernels.push_back(std::move(k));
  }
  if (!r.ok() || r.position() + sizeof(kProfileMagic) + 8 != bytes.size())
    return corruption("kiln PGLE profile is truncated or has trailing bytes");
  return p;
}

std::string fdo_profile_digest(std::string_view bytes) { return sha256_hex(bytes); }

std::string format_fdo_profile(const FdoProfile& profile) {
  std::vector<const KernelProfile*> order;
  for (const KernelProfile& k : profile.kernels) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(), [](const KernelProfile* a, const KernelProfile* b) {
    return a->best_ns() > b->best_ns();
  });
  int64_t total = profile.total_ns();
  char line[512];
  std::string out = "kiln PGLE profile: format " + std::to_string(kProfileFormatVersion) + ", " +
                    std::to_string(profile.kernels.size()) + " kernels, " +
                    std::to_string(profile.runs) + " runs aggregated at p" +
                    std::to_string(profile.percentile) + ", total " + format_duration_ns(total) +
                    "\n";
  std::snprintf(line, sizeof(line), "%-16s %7s %12s  %s\n", "fingerprint", "share", "cost",
                "kernel (candidates: cost)");
  out += line;
  for (const KernelProfile* k : order) {
    double share = total > 0 ? 100.0 * double(k->best_ns()) / double(total) : 0;
    std::snprintf(line, sizeof(line), "%016llx %6.2f%% %12s  %s",
                  static_cast<unsigned long long>(k->fingerprint), share,
                  format_duration_ns(k->best_ns()).c_str(), k->name.c_str());
    out += line;
    if (k->candidate_ns.size() > 1) {
      int best = k->best_candidate();
      out += " (";
      for (size_t c = 0; c < k->candidate_ns.size(); ++c) {
        out += (c ? ", " : "") + (c < k->candidate_names.size() ? k->candidate_names[c] : "?") +
               ": " + format_duration_ns(k->candidate_ns[c]) + (int(c) == best ? " *" : "");
      }
      out += ")";
    }
    out += "\n";
  }
  return out;
}

double percentile_of(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(samples.size() - 1);
  size_t lower = static_cast<size_t>(std::floor(rank));
  size_t upper = std::min(lower + 1, samples.size() - 1);
  return samples[lower] + (samples[upper] - samples[lower]) * (rank - double(lower));
}

PgleProfiler::PgleProfiler(int runs, double percentile, int warmup_runs)
    : runs_(std::max(runs, 0)),
      percentile_(std::clamp(percentile, 0.0, 100.0)),
      warmup_(std::max(warmup_runs, 0)) {}

std::shared_ptr<PgleProfiler> PgleProfiler::from_flags() {
  return std::make_shared<PgleProfiler>(
      static_cast<int>(config::get_int("KILN_PGLE_PROFILING_RUNS")),
      config::get_double("KILN_PGLE_AGGREGATION_PERCENTILE"),
      static_cast<int>(config::get_int("KILN_PGLE_WARMUP_RUNS")));
}

bool PgleProfiler::enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enabled_;
}

void PgleProfiler::disable() {
  std::lock_guard<std::mutex> lock(mutex_);
  enabled_ = false;
}

bool PgleProfiler::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_ >= runs_;
}

bool PgleProfiler::warming_up() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enabled_ && discarded_ < warmup_;
}

int PgleProfiler::runs_recorded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

uint64_t PgleProfiler::begin_run() {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t run = next_run_++;
  return run < uint64_t(warmup_) ? 0 : run - warmup_;
}

void PgleProfiler::record(const std::vector<KernelInfo>& kernels,
                          const std::vector<KernelSample>& samples) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) return;
  // The first executions fault in pages and warm caches: not what a kernel costs.
  if (discarded_ < warmup_) {
    ++discarded_;
    return;
  }
  for (size_t i = 0; i < kernels.size() && i < samples.size(); ++i) {
    if (!samples[i].ran) continue;
    KernelSamples& k = kernels_[kernels[i].fingerprint];
    if (k.ns.empty()) {
      k.name = kernels[i].name;
      k.candidate_names = kernels[i].candidate_names;
      k.ns.resize(kernels[i].candidates());
    }
    size_t c = static_cast<size_t>(samples[i].candidate);
    if (c >= k.ns.size()) continue;
    k.ns[c].push_back(static_cast<double>(samples[i].ns));
    ++k.samples;
  }
  ++recorded_;
}

FdoProfile PgleProfiler::aggregate() const {
  std::lock_guard<std::mutex> lock(mutex_);
  FdoProfile p;
  p.percentile = static_cast<uint32_t>(std::lround(percentile_));
  p.runs = static_cast<uint32_t>(recorded_);
  for (const auto& [fingerprint, k] : kernels_) {  // std::map: sorted by fingerprint
    KernelProfile out;
    out.fingerprint = fingerprint;
    out.name = k.name;
    out.candidate_names = k.candidate_names;
    out.samples = k.samples;
    for (const std::vector<double>& ns : k.ns)
      out.candidate_ns.push_back(
          ns.empty() ? kNotMeasured
                     : static_cast<int64_t>(std::llround(percentile_of(ns, percentile_))));
    p.kernels.push_back(std::move(out));
  }
  return p;
}

}  // namespace kiln

// kiln's software floating point (backend/cpu/small_floats.h) against LLVM's APFloat, through the
// library mlir-runner uses for the same calls (libmlir_apfloat_wrappers, loaded here with its own
// symbols): every encoding and every pair of encodings of the 8-, 6- and 4-bit formats, samples
// of the 16- and 32-bit ones. Where the two differ on purpose, the test says why.
#include <dlfcn.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"

extern "C" {
uint64_t _mlir_apfloat_add(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_subtract(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_multiply(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_divide(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_remainder(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_maximum(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_minimum(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_maxnum(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_minnum(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_fused_multiply_add(int32_t, uint64_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_neg(int32_t, uint64_t);
uint64_t _mlir_apfloat_abs(int32_t, uint64_t);
int8_t _mlir_apfloat_compare(int32_t, uint64_t, uint64_t);
uint64_t _mlir_apfloat_convert(int32_t, int32_t, uint64_t);
uint64_t _mlir_apfloat_convert_to_int(int32_t, int32_t, bool, uint64_t);
uint64_t _mlir_apfloat_convert_from_int(int32_t, int32_t, bool, uint64_t);
bool _mlir_apfloat_isnan(int32_t, uint64_t);
bool _mlir_apfloat_isinfinite(int32_t, uint64_t);
bool _mlir_apfloat_isfinite(int32_t, uint64_t);
bool _mlir_apfloat_isnormal(int32_t, uint64_t);
}

namespace kiln::testing {
namespace {

// llvm::APFloatBase::Semantics numbers.
constexpr int32_t kHalf = 0, kBFloat = 1, kSingle = 2, kDouble = 3, kE5M2 = 7, kE4M3FN = 10,
                  kE8M0FNU = 15;
struct Format {
  int32_t semantics;
  int bits;
  const char* name;
};
const std::vector<Format>& small_formats() {
  static const std::vector<Format> formats = {
      {7, 8, "f8E5M2"},      {8, 8, "f8E5M2FNUZ"},     {9, 8, "f8E4M3"},   {10, 8, "f8E4M3FN"},
      {11, 8, "f8E4M3FNUZ"}, {12, 8, "f8E4M3B11FNUZ"}, {13, 8, "f8E3M4"},  {15, 8, "f8E8M0FNU"},
      {16, 6, "f6E3M2FN"},   {17, 6, "f6E2M3FN"},      {18, 4, "f4E2M1FN"}};
  return formats;
}

using Binary = uint64_t (*)(int32_t, uint64_t, uint64_t);

// APFloat's implementations, from the library mlir-runner loads.
class Reference {
 public:
  Reference() {
    std::string path = std::string(MLIR_RUNTIME_DIR) + "/libmlir_apfloat_wrappers.so";
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) ADD_FAILURE() << "cannot load " << path << ": " << dlerror();
  }
  template <typename F>
  F get(const char* name) const {
    void* symbol = handle_ ? dlsym(handle_, name) : nullptr;
    if (symbol == nullptr) ADD_FAILURE() << "no " << name << " in the APFloat library";
    return reinterpret_cast<F>(symbol);
  }
  bool loaded() const { return handle_ != nullptr; }

 private:
  void* handle_ = nullptr;
};

const Reference& reference() {
  static const Reference r;
  return r;
}

double as_double(int32_t semantics, uint64_t bits) {
  return std::bit_cast<double>(_mlir_apfloat_convert(semantics, kDouble, bits));
}

// Same bits, or both NaN (a NaN's payload is not something kiln promises to carry).
bool same_value(int32_t semantics, uint64_t ours, uint64_t theirs) {
  if (ours == theirs) return true;
  return std::isnan(as_double(semantics, ours)) && std::isnan(as_double(semantics, theirs));
}

bool negative(int32_t semantics, uint64_t bits) { return std::signbit(as_double(semantics, bits)); }

TEST(SmallFloatsTest, EveryEncodingDecodesAsApFloatDecodesIt) {
  ASSERT_TRUE(reference().loaded());
  auto convert = reference().get<uint64_t (*)(int32_t, int32_t, uint64_t)>("_mlir_apfloat_convert");
  for (const Format& f : small_formats())
    for (uint64_t a = 0; a < (uint64_t{1} << f.bits); ++a) {
      uint64_t theirs = convert(f.semantics, kDouble, a);
      uint64_t ours = _mlir_apfloat_convert(f.semantics, kDouble, a);
      // APFloat prints f8E8M0FNU's NaN as infinity; kiln keeps it a NaN.
      if (f.semantics == kE8M0FNU && a == 0xff) {
        EXPECT_TRUE(std::isnan(std::bit_cast<double>(ours)));
        continue;
      }
      EXPECT_TRUE(same_value(kDouble, ours, theirs))
          << f.name << " 0x" << std::hex << a << ": " << std::bit_cast<double>(ours) << " vs "
          << std::bit_cast<double>(theirs);
    }
}

TEST(SmallFloatsTest, ArithmeticOnEveryPairRoundsAsApFloat) {
  ASSERT_TRUE(reference().loaded());
  const std::vector<std::pair<const char*, Binary>> ops = {
      {"_mlir_apfloat_add", &_mlir_apfloat_add},
      {"_mlir_apfloat_subtract", &_mlir_apfloat_subtract},
      {"_mlir_apfloat_multiply", &_mlir_apfloat_multiply},
      {"_mlir_apfloat_divide", &_mlir_apfloat_divide},
      {"_mlir_apfloat_remainder", &_mlir_apfloat_remainder},
      {"_mlir_apfloat_maximum", &_mlir_apfloat_maximum},
      {"_mlir_apfloat_minimum", &_mlir_apfloat_minimum},
      {"_mlir_apfloat_maxnum", &_mlir_apfloat_maxnum},
      {"_mlir_apfloat_minnum", &_mlir_apfloat_minnum}};
  for (const auto& [name, ours] : ops) {
    Binary theirs = reference().get<Binary>(name);
    for (const Format& f : small_formats()) {
      int mismatches = 0;
      for (uint64_t a = 0; a < (uint64_t{1} << f.bits); ++a)
        for (uint64_t b = 0; b < (uint64_t{1} << f.bits); ++b) {
          uint64_t want = theirs(f.semantics, a, b), got = ours(f.semantics, a, b);
          // f8E8M0FNU has no negative numbers: kiln gives NaN where APFloat ORs the sign into
          // the exponent (-2^-100 became 2^28).
          if (f.semantics == kE8M0FNU && std::string(name) == "_mlir_apfloat_subtract") continue;
          if (!same_value(f.semantics, got, want) && mismatches++ < 5)
            ADD_FAILURE() << name << " " << f.name << " 0x" << std::hex << a << ", 0x" << b
                          << ": kiln 0x" << got << ", APFloat 0x" << want;
        }
      EXPECT_EQ(mismatches, 0) << name << " " << f.name;
    }
  }
}

TEST(SmallFloatsTest, ComparisonsSignsAndClassesAsApFloat) {
  ASSERT_TRUE(reference().loaded());
  auto compare = reference().get<int8_t (*)(int32_t, uint64_t, uint64_t)>("_mlir_apfloat_compare");
  auto neg = reference().get<uint64_t (*)(int32_t, uint64_t)>("_mlir_apfloat_neg");
  auto abs = reference().get<uint64_t (*)(int32_t, uint64_t)>("_mlir_apfloat_abs");
  using Predicate = bool (*)(int32_t, uint64_t);
  const std::vector<std::pair<const char*, Predicate>> predicates = {
      {"_mlir_apfloat_isnan", &_mlir_apfloat_isnan},
      {"_mlir_apfloat_isinfinite", &_mlir_apfloat_isinfinite},
      {"_mlir_apfloat_isfinite", &_mlir_apfloat_isfinite},
      {"_mlir_apfloat_isnormal", &_mlir_apfloat_isnormal}};
  for (const Format& f : small_formats()) {
    uint64_t count = uint64_t{1} << f.bits;
    for (uint64_t a = 0; a < count; ++a) {
      if (f.semantics == kE8M0FNU && a == 0xff) continue;  // see EveryEncodingDecodes...
      for (uint64_t b = 0; b < count; ++b) {
        if (f.semantics == kE8M0FNU && b == 0xff) continue;
        EXPECT_EQ(_mlir_apfloat_compare(f.semantics, a, b), compare(f.semantics, a, b))
            << f.name << " 0x" << std::hex << a << " 0x" << b;
      }
      if (f.semantics != kE8M0FNU) {
        EXPECT_TRUE(same_value(f.semantics, _mlir_apfloat_neg(f.semantics, a), neg(f.semantics, a)))
            << f.name << " neg 0x" << std::hex << a;
        EXPECT_TRUE(same_value(f.semantics, _mlir_apfloat_abs(f.semantics, a), abs(f.semantics, a)))
            << f.name << " abs 0x" << std::hex << a;
      }
      for (const auto& [name, ours] : predicates)
        EXPECT_EQ(ours(f.semantics, a), reference().get<Predicate>(name)(f.semantics, a))
            << name << " " << f.name << " 0x" << std::hex << a;
    }
  }
}

// Every value of every format, the points halfway between neighbours (where ties go to even),
// and values past the ends: converted to every format, from double and from each other.
TEST(SmallFloatsTest, ConversionsRoundToNearestEvenAndSaturateAsApFloat) {
  ASSERT_TRUE(reference().loaded());
  auto convert = reference().get<uint64_t (*)(int32_t, int32_t, uint64_t)>("_mlir_apfloat_convert");
  std::vector<double> values = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e30, -1e30, 1e-30, 1e-45};
  for (const Format& f : small_formats())
    for (uint64_t a = 0; a < (uint64_t{1} << f.bits); ++a) {
      double v = as_double(f.semantics, a);
      if (!std::isfinite(v)) continue;
      values.push_back(v);
      values.push_back(std::nextafter(v, INFINITY));
      values.push_back(std::nextafter(v, -INFINITY));
      values.push_back(v * 1.5);  // halfway to the next binade's first value, or between values
      values.push_back(v * 1.0625);
    }
  std::vector<int32_t> targets = {kHalf, kBFloat, kSingle};
  for (const Format& f : small_formats()) targets.push_back(f.semantics);
  for (int32_t to : targets) {
    int mismatches = 0;
    for (double v : values) {
      if (to == kE8M0FNU && std::signbit(v)) continue;  // no negative numbers (see above)
      uint64_t bits = std::bit_cast<uint64_t>(v);
      uint64_t want = convert(kDouble, to, bits), got = _mlir_apfloat_convert(kDouble, to, bits);
      if (!same_value(to, got, want) && mismatches++ < 5)
        ADD_FAILURE() << "format " << to << " from " << v << ": kiln 0x" << std::hex << got
                      << ", APFloat 0x" << want;
    }
    EXPECT_EQ(mismatches, 0) << "format " << to;
    for (const Format& from : small_formats())
      for (uint64_t a = 0; a < (uint64_t{1} << from.bits); ++a) {
        if (to == kE8M0FNU && negative(from.semantics, a)) continue;
        if (from.semantics == kE8M0FNU && a == 0xff) continue;
        EXPECT_TRUE(same_value(to, _mlir_apfloat_convert(from.semantics, to, a),
                               convert(from.semantics, to, a)))
            << from.name << " 0x" << std::hex << a << " to format " << std::dec << to;
      }
  }
}

TEST(SmallFloatsTest, IntegerConversionsTruncateTowardZeroAndSaturate) {
  ASSERT_TRUE(reference().loaded());
  auto from_int = reference().get<uint64_t (*)(int32_t, int32_t, bool, uint64_t)>(
      "_mlir_apfloat_convert_from_int");
  auto to_int = reference().get<uint64_t (*)(int32_t, int32_t, bool, uint64_t)>(
      "_mlir_apfloat_convert_to_int");
  std::vector<uint64_t> integers;
  for (int64_t i = -70000; i <= 70000; i += 7) integers.push_back(static_cast<uint64_t>(i));
  for (uint64_t big : {~uint64_t{0}, uint64_t{1} << 63, (uint64_t{1} << 63) - 1,
                       (uint64_t{1} << 53) + 1, uint64_t{0xfedcba9876543210}})
    integers.push_back(big);
  for (const Format& f : small_formats())
    for (bool is_unsigned : {false, true})
      for (uint64_t i : integers) {
        if (f.semantics == kE8M0FNU && !is_unsigned && static_cast<int64_t>(i) < 0) continue;
        EXPECT_TRUE(same_value(f.semantics,
                               _mlir_apfloat_convert_from_int(f.semantics, 64, is_unsigned, i),
                               from_int(f.semantics, 64, is_unsigned, i)))
            << f.name << " from " << (is_unsigned ? "u" : "s") << "64 " << i;
      }
  // To integers: toward zero, as arith.fptosi/fptoui define it. (MLIR 22's library rounds to
  // nearest: it agrees wherever the value is already an integer.)
  for (const Format& f : small_formats())
    for (uint64_t a = 0; a < (uint64_t{1} << f.bits); ++a) {
      double v = as_double(f.semantics, a);
      for (int width : {8, 16, 32, 64})
        for (bool is_unsigned : {false, true}) {
          uint64_t got = _mlir_apfloat_convert_to_int(f.semantics, width, is_unsigned, a);
          if (std::isfinite(v) && v == std::trunc(v)) {
            uint64_t want = to_int(f.semantics, width, is_unsigned, a);
            uint64_t mask = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
            EXPECT_EQ(got & mask, want & mask)
                << f.name << " " << v << " to " << (is_unsigned ? "u" : "s") << width;
          } else if (std::isfinite(v) && std::fabs(v) < 100) {
            double t = std::trunc(v);
            int64_t want = is_unsigned && t < 0 ? 0 : static_cast<int64_t>(t);
            EXPECT_EQ(static_cast<int64_t>(got), want) << f.name << " " << v;
          } else if (std::isnan(v)) {
            EXPECT_EQ(got, 0u) << f.name << " NaN";
          }
        }
    }
}

// The 16- and 32-bit formats (which modules with small floats also compute in) and fused
// multiply-add: random samples.
TEST(SmallFloatsTest, WiderFormatsAndFusedMultiplyAddMatchOnSamples) {
  ASSERT_TRUE(reference().loaded());
  std::mt19937_64 random(20261204);
  const std::vector<std::pair<const char*, Binary>> ops = {
      {"_mlir_apfloat_add", &_mlir_apfloat_add},
      {"_mlir_apfloat_multiply", &_mlir_apfloat_multiply},
      {"_mlir_apfloat_divide", &_mlir_apfloat_divide},
      {"_mlir_apfloat_remainder", &_mlir_apfloat_remainder}};
  for (auto [semantics, bits] :
       std::vector<std::pair<int32_t, int>>{{kHalf, 16}, {kBFloat, 16}, {kSingle, 32}})
    for (const auto& [name, ours] : ops) {
      Binary theirs = reference().get<Binary>(name);
      int mismatches = 0;
      for (int k = 0; k < 100000; ++k) {
        uint64_t a = random() >> (64 - bits), b = random() >> (64 - bits);
        if (!same_value(semantics, ours(semantics, a, b), theirs(semantics, a, b)) &&
            mismatches++ < 5)
          ADD_FAILURE() << name << " format " << semantics << " 0x" << std::hex << a << " 0x" << b;
      }
      EXPECT_EQ(mismatches, 0) << name << " format " << semantics;
    }
  auto fma = reference().get<uint64_t (*)(int32_t, uint64_t, uint64_t, uint64_t)>(
      "_mlir_apfloat_fused_multiply_add");
  for (int32_t semantics : {kE4M3FN, kE5M2, kHalf}) {
    int bits = semantics == kHalf ? 16 : 8;
    int mismatches = 0;
    for (int k = 0; k < 200000; ++k) {
      uint64_t a = random() >> (64 - bits), b = random() >> (64 - bits),
               c = random() >> (64 - bits);
      if (!same_value(semantics, _mlir_apfloat_fused_multiply_add(semantics, a, b, c),
                      fma(semantics, a, b, c)) &&
          mismatches++ < 5)
        ADD_FAILURE() << "fma format " << semantics << " 0x" << std::hex << a << " 0x" << b << " 0x"
                      << c;
    }
    EXPECT_EQ(mismatches, 0) << "fma format " << semantics;
  }
}

}  // namespace
}  // namespace kiln::testing

#include "backend/cpu/small_floats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iterator>

namespace kiln::cpu {
namespace {

using enum NonFinite;

int mantissa_bits(const FloatFormat& f) { return f.precision - 1; }
int exponent_bits(const FloatFormat& f) { return f.bits - (f.has_sign ? 1 : 0) - mantissa_bits(f); }
uint64_t low_bits(int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

bool is_double(const FloatFormat& f) { return f.bits == 64; }
bool is_single(const FloatFormat& f) { return f.bits == 32; }

}  // namespace

const FloatFormat* float_format(int32_t semantics) {
  // Indexed by llvm::APFloatBase::Semantics (LLVM 22): S_IEEEhalf = 0 ... S_Float4E2M1FN = 18.
  static const FloatFormat kHalf{16, 11, 15, -14, 15, kIeee};
  static const FloatFormat kBFloat{16, 8, 127, -126, 127, kIeee};
  static const FloatFormat kSingle{32, 24, 127, -126, 127, kIeee};
  static const FloatFormat kDouble{64, 53, 1023, -1022, 1023, kIeee};
  static const FloatFormat kE5M2{8, 3, 15, -14, 15, kIeee};
  static const FloatFormat kE5M2FNUZ{8, 3, 15, -15, 16, kNanNegZero};
  static const FloatFormat kE4M3{8, 4, 7, -6, 7, kIeee};
  static const FloatFormat kE4M3FN{8, 4, 8, -6, 7, kNanAllOnes};
  static const FloatFormat kE4M3FNUZ{8, 4, 7, -7, 8, kNanNegZero};
  static const FloatFormat kE4M3B11FNUZ{8, 4, 4, -10, 11, kNanNegZero};
  static const FloatFormat kE3M4{8, 5, 3, -2, 3, kIeee};
  static const FloatFormat kTF32{19, 11, 127, -126, 127, kIeee};
  static const FloatFormat kE8M0FNU{8, 1, 127, -127, 127, kNanAllOnes, false, false};
  static const FloatFormat kE3M2FN{6, 3, 4, -2, 3, kFiniteOnly};
  static const FloatFormat kE2M3FN{6, 4, 2, 0, 1, kFiniteOnly};
  static const FloatFormat kE2M1FN{4, 2, 2, 0, 1, kFiniteOnly};
  static const FloatFormat* const kBySemantics[] = {
      &kHalf, &kBFloat,   &kSingle, &kDouble, nullptr,    nullptr,       nullptr,
      &kE5M2, &kE5M2FNUZ, &kE4M3,   &kE4M3FN, &kE4M3FNUZ, &kE4M3B11FNUZ, &kE3M4,
      &kTF32, &kE8M0FNU,  &kE3M2FN, &kE2M3FN, &kE2M1FN};
  if (semantics < 0 || semantics >= static_cast<int32_t>(std::size(kBySemantics))) return nullptr;
  return kBySemantics[semantics];
}

double decode_float(const FloatFormat& f, uint64_t bits) {
  if (is_double(f)) return std::bit_cast<double>(bits);
  if (is_single(f)) return std::bit_cast<float>(static_cast<uint32_t>(bits));
  const int mbits = mantissa_bits(f);
  const uint64_t emask = low_bits(exponent_bits(f)), mmask = low_bits(mbits);
  const bool negative = f.has_sign && ((bits >> (f.bits - 1)) & 1);
  const uint64_t e = (bits >> mbits) & emask, m = bits & mmask;
  const double nan = negative ? -NAN : NAN;
  switch (f.non_finite) {
    case kIeee:
      if (e == emask) return m != 0 ? nan : (negative ? -INFINITY : INFINITY);
      break;
    case kNanAllOnes:
      if (e == emask && m == mmask) return nan;
      break;
    case kNanNegZero:
      if (negative && e == 0 && m == 0) return NAN;
      break;
    case kFiniteOnly:
      break;
  }
  double magnitude = (e == 0 && f.has_zero)
                         ? std::ldexp(static_cast<double>(m), f.emin - mbits)
                         : std::ldexp(static_cast<double>((uint64_t{1} << mbits) | m),
                                      static_cast<int>(e) - f.bias - mbits);
  return negative ? -magnitude : magnitude;
}

uint64_t encode_float(const FloatFormat& f, long double value) {
  if (is_double(f)) return std::bit_cast<uint64_t>(static_cast<double>(value));
  if (is_single(f)) return std::bit_cast<uint32_t>(static_cast<float>(value));
  const int mbits = mantissa_bits(f);
  const uint64_t emask = low_bits(exponent_bits(f)), mmask = low_bits(mbits);
  const bool negative = std::signbit(value);
  const uint64_t sign = f.has_sign && negative ? uint64_t{1} << (f.bits - 1) : 0;
  const uint64_t infinity = sign | emask << mbits;
  auto nan = [&]() -> uint64_t {
    switch (f.non_finite) {
      case kIeee:
        return infinity | (mbits > 0 ? uint64_t{1} << (mbits - 1) : 0);  // quiet
      case kNanAllOnes:
        return sign | emask << mbits | mmask;
      case kNanNegZero:
        return uint64_t{1} << (f.bits - 1);
      case kFiniteOnly:
        return sign;  // zero: there is nothing else to give
    }
    return 0;
  };
  auto zero = [&]() -> uint64_t {
    if (!f.has_zero) return 0;  // the smallest value stands in for zero
    return f.non_finite == kNanNegZero ? 0 : sign;
  };
  if (std::isnan(value)) return nan();
  // A format without a sign has no negative numbers to round to.
  if (!f.has_sign && negative && value != 0) return nan();
  if (std::isinf(value)) return f.non_finite == kIeee ? infinity : nan();
  const long double magnitude = std::fabs(value);
  if (magnitude == 0) return zero();
  int binade = 0;
  std::frexp(magnitude, &binade);  // magnitude in [2^(binade-1), 2^binade)
  int quantum = std::max(binade - 1, f.emin) - mbits;
  // Scaling by a power of two is exact; the one rounding is here (to nearest, ties to even).
  long double units = std::nearbyint(std::ldexp(magnitude, -quantum));
  if (units == 0) return zero();
  uint64_t significand = static_cast<uint64_t>(units);
  if (significand >> (mbits + 1)) {  // rounded up into the next binade
    significand >>= 1;
    ++quantum;
  }
  const bool normal = (significand >> mbits) != 0;
  const int exponent = quantum + mbits;
  const bool past_largest =
      normal && (exponent > f.emax || (f.non_finite == kNanAllOnes && exponent == f.emax &&
                                       static_cast<uint64_t>(f.emax + f.bias) == emask &&
                                       (significand & mmask) == mmask));
  if (past_largest) {
    switch (f.non_finite) {
      case kIeee:
        return infinity;
      case kFiniteOnly:
        return sign | static_cast<uint64_t>(f.emax + f.bias) << mbits | mmask;
      default:
        return nan();
    }
  }
  const uint64_t exponent_field = normal ? static_cast<uint64_t>(exponent + f.bias) : 0;
  return sign | exponent_field << mbits | (significand & mmask);
}

}  // namespace kiln::cpu

// The functions generated code calls (convert-arith-to-apfloat, convert-math-to-apfloat and the
// vector.print lowering name them): a format number, then values as bits in the low end of a
// 64-bit integer. Arithmetic is done in double and rounded once to the format: for formats of at
// most 24 significand bits that gives the correctly rounded result of +, -, *, / (a double holds
// twice their precision and more); double itself is exact.
namespace {

using kiln::cpu::FloatFormat;

const FloatFormat& format_or_die(int32_t semantics) {
  const FloatFormat* f = kiln::cpu::float_format(semantics);
  if (f == nullptr) {
    std::fprintf(stderr,
                 "kiln: floating-point format %d is not emulated (only IEEE half, bfloat, "
                 "single, double, tf32 and the 8-, 6- and 4-bit formats are)\n",
                 semantics);
    std::abort();
  }
  return *f;
}
double value_of(int32_t semantics, uint64_t bits) {
  return kiln::cpu::decode_float(format_or_die(semantics), bits);
}
uint64_t bits_of(int32_t semantics, long double value) {
  return kiln::cpu::encode_float(format_or_die(semantics), value);
}
uint64_t sign_bit(int32_t semantics) {
  const FloatFormat& f = format_or_die(semantics);
  return f.has_sign ? uint64_t{1} << (f.bits - 1) : 0;
}

// A NaN that an invalid operation creates (0/0, inf-inf) is positive, as APFloat's default NaN
// (x86 makes it negative); NaN operands pass through as the hardware propagates them.
double arithmetic_result(double result, std::initializer_list<double> operands) {
  if (!std::isnan(result)) return result;
  for (double operand : operands)
    if (std::isnan(operand)) return result;
  return NAN;
}

// A signaling NaN: an IEEE format's NaN with the quiet bit (the mantissa's top bit) clear.
bool is_signaling(int32_t s, uint64_t bits) {
  const FloatFormat& f = format_or_die(s);
  if (f.non_finite != kiln::cpu::NonFinite::kIeee || !std::isnan(value_of(s, bits))) return false;
  return ((bits >> (f.precision - 2)) & 1) == 0;
}

// maximum/minimum (NaN wins) and maxnum/minnum (a quiet NaN loses, a signaling one wins, as IEEE
// 754-2008's minNum/maxNum); +0 counts as larger than -0.
uint64_t pick(int32_t s, uint64_t a, uint64_t b, bool larger, bool nan_wins) {
  double x = value_of(s, a), y = value_of(s, b);
  if (std::isnan(x) || std::isnan(y)) {
    if (nan_wins || is_signaling(s, a) || is_signaling(s, b))
      return bits_of(s, std::isnan(x) ? x : y);
    return std::isnan(x) ? b : a;
  }
  if (x == y) return (std::signbit(x) != larger) ? a : b;
  return (x > y) == larger ? a : b;
}

}  // namespace

#define KILN_APFLOAT_EXPORT extern "C" __attribute__((visibility("default")))

KILN_APFLOAT_EXPORT void printF64(double d);

KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_add(int32_t s, uint64_t a, uint64_t b) {
  double x = value_of(s, a), y = value_of(s, b);
  return bits_of(s, arithmetic_result(x + y, {x, y}));
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_subtract(int32_t s, uint64_t a, uint64_t b) {
  double x = value_of(s, a), y = value_of(s, b);
  return bits_of(s, arithmetic_result(x - y, {x, y}));
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_multiply(int32_t s, uint64_t a, uint64_t b) {
  double x = value_of(s, a), y = value_of(s, b);
  return bits_of(s, arithmetic_result(x * y, {x, y}));
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_divide(int32_t s, uint64_t a, uint64_t b) {
  double x = value_of(s, a), y = value_of(s, b);
  return bits_of(s, arithmetic_result(x / y, {x, y}));
}
// IEEE remainder (the quotient rounded to nearest), as APFloat's; it is always exact.
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_remainder(int32_t s, uint64_t a, uint64_t b) {
  double x = value_of(s, a), y = value_of(s, b);
  return bits_of(s, arithmetic_result(std::remainder(x, y), {x, y}));
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_fused_multiply_add(int32_t s, uint64_t a, uint64_t b,
                                                              uint64_t c) {
  double x = value_of(s, a), y = value_of(s, b), z = value_of(s, c);
  if (format_or_die(s).bits == 64)
    return bits_of(s, arithmetic_result(std::fma(x, y, z), {x, y, z}));
  // The product of two values of at most 24 significand bits is exact in a long double.
  long double result = std::fma(static_cast<long double>(x), static_cast<long double>(y),
                                static_cast<long double>(z));
  if (std::isnan(result)) return bits_of(s, arithmetic_result(NAN, {x, y, z}));
  return bits_of(s, result);
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_neg(int32_t s, uint64_t a) {
  const FloatFormat& f = format_or_die(s);
  if (!f.has_sign) return bits_of(s, -value_of(s, a));
  // Zero and NaN share the sign bit's place in formats without -0: both stay as they are.
  if (f.non_finite == kiln::cpu::NonFinite::kNanNegZero && (a & ~sign_bit(s)) == 0) return a;
  return a ^ sign_bit(s);
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_abs(int32_t s, uint64_t a) {
  const FloatFormat& f = format_or_die(s);
  if (!f.has_sign || (f.non_finite == kiln::cpu::NonFinite::kNanNegZero && a == sign_bit(s)))
    return a;
  return a & ~sign_bit(s);
}
// llvm::APFloat::cmpResult: less, equal, greater, unordered.
KILN_APFLOAT_EXPORT int8_t _mlir_apfloat_compare(int32_t s, uint64_t a, uint64_t b) {
  double x = value_of(s, a), y = value_of(s, b);
  if (std::isnan(x) || std::isnan(y)) return 3;
  return x < y ? 0 : (x == y ? 1 : 2);
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_maximum(int32_t s, uint64_t a, uint64_t b) {
  return pick(s, a, b, true, true);
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_minimum(int32_t s, uint64_t a, uint64_t b) {
  return pick(s, a, b, false, true);
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_maxnum(int32_t s, uint64_t a, uint64_t b) {
  return pick(s, a, b, true, false);
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_minnum(int32_t s, uint64_t a, uint64_t b) {
  return pick(s, a, b, false, false);
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_convert(int32_t from, int32_t to, uint64_t a) {
  return bits_of(to, value_of(from, a));
}
// fptosi/fptoui: toward zero, as the arith ops define them (MLIR 22's own runtime library rounds
// to nearest here); out of range saturates, NaN is 0.
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_convert_to_int(int32_t s, int32_t width,
                                                          bool is_unsigned, uint64_t a) {
  long double v = std::trunc(static_cast<long double>(value_of(s, a)));
  if (std::isnan(v)) return 0;
  if (is_unsigned) {
    long double largest = std::ldexp(1.0L, width) - 1;
    if (v <= 0) return 0;
    return v >= largest ? (width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1)
                        : static_cast<uint64_t>(v);
  }
  long double bound = std::ldexp(1.0L, width - 1);
  if (v >= bound) return static_cast<uint64_t>(static_cast<int64_t>(bound - 1));
  if (v < -bound) return static_cast<uint64_t>(static_cast<int64_t>(-bound));
  return static_cast<uint64_t>(static_cast<int64_t>(v));
}
KILN_APFLOAT_EXPORT uint64_t _mlir_apfloat_convert_from_int(int32_t s, int32_t width,
                                                            bool is_unsigned, uint64_t a) {
  uint64_t raw = width >= 64 ? a : a & ((uint64_t{1} << width) - 1);
  if (is_unsigned) return bits_of(s, static_cast<long double>(raw));
  // Sign-extend from the integer's width; a long double holds every 64-bit integer exactly.
  int64_t signed_value = width >= 64 ? static_cast<int64_t>(raw)
                                     : static_cast<int64_t>(raw << (64 - width)) >> (64 - width);
  return bits_of(s, static_cast<long double>(signed_value));
}
KILN_APFLOAT_EXPORT bool _mlir_apfloat_isnan(int32_t s, uint64_t a) {
  return std::isnan(value_of(s, a));
}
KILN_APFLOAT_EXPORT bool _mlir_apfloat_isinfinite(int32_t s, uint64_t a) {
  return std::isinf(value_of(s, a));
}
KILN_APFLOAT_EXPORT bool _mlir_apfloat_isfinite(int32_t s, uint64_t a) {
  return std::isfinite(value_of(s, a));
}
// Finite, not zero and not subnormal (in the format, not as a double).
KILN_APFLOAT_EXPORT bool _mlir_apfloat_isnormal(int32_t s, uint64_t a) {
  const FloatFormat& f = format_or_die(s);
  double v = value_of(s, a);
  if (!std::isfinite(v) || v == 0) return false;
  if (!f.has_zero) return true;
  return std::fabs(v) >= std::ldexp(1.0, f.emin);
}
KILN_APFLOAT_EXPORT void printApFloat(int32_t s, uint64_t a) { printF64(value_of(s, a)); }

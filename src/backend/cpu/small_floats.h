// Floating-point formats kiln's runtime emulates in software: the 8-, 6- and 4-bit formats of ML
// (f8E4M3FN, f8E5M2, f4E2M1FN, ...) that CPUs have no instructions for, plus the IEEE formats
// they convert to and from. Generated code calls the `_mlir_apfloat_*` functions (MLIR's
// convert-arith-to-apfloat names them) with a format number and the value's bits; this is kiln's
// implementation of them, without LLVM at run time.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// How a format spells what is not a finite number.
enum class NonFinite {
  kIeee,        // all-ones exponent: infinity (zero mantissa) or NaN
  kNanAllOnes,  // no infinity; all-ones exponent and mantissa is NaN
  kNanNegZero,  // no infinity, no -0: the bits of -0 are NaN
  kFiniteOnly,  // every encoding is a finite number
};

struct FloatFormat {
  int bits;       // storage width
  int precision;  // significand bits, the leading one included
  int emax;       // largest exponent of a finite number
  int emin;       // exponent of the smallest normal number
  int bias;
  NonFinite non_finite;
  bool has_sign = true;
  bool has_zero = true;  // false: the all-zeros encoding is 2^emin (f8E8M0FNU)
};

// The format MLIR numbers `semantics` (llvm::APFloatBase::Semantics, as convert-arith-to-apfloat
// passes it), or null for one kiln does not emulate (quad, double-double, x87).
const FloatFormat* float_format(int32_t semantics);

// The value of `bits` in `format`, exactly (every emulated format fits a double).
double decode_float(const FloatFormat& format, uint64_t bits);

// `value` rounded to nearest, ties to even, in `format`. Past the largest finite value: infinity,
// NaN or the largest value, as the format has them; NaN and infinity in formats without them:
// NaN, or zero in a format with neither (as LLVM's APFloat converts).
uint64_t encode_float(const FloatFormat& format, long double value);

}  // namespace kiln::cpu

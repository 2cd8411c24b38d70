// Arithmetic in 8- and 4-bit floats, which no CPU computes in: kiln emulates it in software and
// prints the values as mlir-runner does (with MLIR's APFloat runtime).
func.func @scaled(%x: f8E4M3FN, %scale: f8E4M3FN) -> f8E4M3FN {
  %y = arith.mulf %x, %scale : f8E4M3FN
  return %y : f8E4M3FN
}

func.func @main() {
  %a = arith.constant dense<[1.0, 2.0, 3.5, -4.0, 0.125, 448.0]> : vector<6xf8E4M3FN>
  %b = arith.constant dense<[0.5, 0.25, 1.0, 100.0, 0.0625, 64.0]> : vector<6xf8E4M3FN>
  %sum = arith.addf %a, %b : vector<6xf8E4M3FN>
  vector.print %sum : vector<6xf8E4M3FN>
  %quotient = arith.divf %a, %b : vector<6xf8E4M3FN>
  vector.print %quotient : vector<6xf8E4M3FN>
  %small = arith.truncf %sum : vector<6xf8E4M3FN> to vector<6xf4E2M1FN>
  vector.print %small : vector<6xf4E2M1FN>
  %wide = arith.extf %a : vector<6xf8E4M3FN> to vector<6xf32>
  vector.print %wide : vector<6xf32>
  %larger = arith.maximumf %a, %b : vector<6xf8E4M3FN>
  vector.print %larger : vector<6xf8E4M3FN>
  %e5 = arith.truncf %wide : vector<6xf32> to vector<6xf8E5M2>
  vector.print %e5 : vector<6xf8E5M2>
  %x = arith.constant 1.75 : f8E4M3FN
  %s = arith.constant 3.0 : f8E4M3FN
  %y = func.call @scaled(%x, %s) : (f8E4M3FN, f8E4M3FN) -> f8E4M3FN
  vector.print %y : f8E4M3FN
  %less = arith.cmpf olt, %x, %y : f8E4M3FN
  vector.print %less : i1
  return
}

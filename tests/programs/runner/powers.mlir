// Integer powers (math.ipowi) and float-to-integer powers (math.fpowi): ops LLVM has no
// instruction for, which kiln turns into generated functions.
func.func @ipow(%base: i32, %exp: i32) -> i32 {
  %r = math.ipowi %base, %exp : i32
  return %r : i32
}

func.func @fpow(%base: f32, %exp: i32) -> f32 {
  %r = math.fpowi %base, %exp : f32, i32
  return %r : f32
}

func.func @main() {
  %c3 = arith.constant 3 : i32
  %c4 = arith.constant 4 : i32
  %cm2 = arith.constant -2 : i32
  %c0 = arith.constant 0 : i32
  %two = arith.constant 2.0 : f32
  %half = arith.constant 0.5 : f32
  %a = func.call @ipow(%c3, %c4) : (i32, i32) -> i32
  vector.print %a : i32
  %b = func.call @ipow(%cm2, %c3) : (i32, i32) -> i32
  vector.print %b : i32
  %c = func.call @ipow(%c4, %c0) : (i32, i32) -> i32
  vector.print %c : i32
  %d = func.call @fpow(%two, %cm2) : (f32, i32) -> f32
  vector.print %d : f32
  %e = func.call @fpow(%half, %c3) : (f32, i32) -> f32
  vector.print %e : f32
  return
}

// Entries returning one scalar, for --entry-point-result=i32|i64|f32.
func.func @answer_i32() -> i32 {
  %a = arith.constant 40 : i32
  %b = arith.constant 2 : i32
  %r = arith.addi %a, %b : i32
  return %r : i32
}

func.func @answer_i64() -> i64 {
  %r = arith.constant -9000000000 : i64
  return %r : i64
}

func.func @answer_f32() -> f32 {
  %a = arith.constant 1.5 : f32
  %b = arith.constant 2.25 : f32
  %r = arith.mulf %a, %b : f32
  return %r : f32
}

func.func @takes_an_argument(%x: i32) -> i32 {
  return %x : i32
}

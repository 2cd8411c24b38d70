// Calls a function defined in a library loaded with --shared-libs.
func.func private @kiln_test_add_seven(i32) -> i32

func.func @main() -> i32 {
  %c = arith.constant 35 : i32
  %r = func.call @kiln_test_add_seven(%c) : (i32) -> i32
  vector.print %r : i32
  return %r : i32
}

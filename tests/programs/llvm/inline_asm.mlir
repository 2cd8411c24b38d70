// x86-64 inline assembly: 41 + 1 through `lea`.
func.func @main() {
  %c41 = arith.constant 41 : i32
  %r = llvm.inline_asm "leal 1($1), $0", "=r,r" %c41 : (i32) -> i32
  vector.print %r : i32
  return
}

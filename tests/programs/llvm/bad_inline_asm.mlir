// Inline assembly the x86 assembler rejects: an error for the program, not an exit.
func.func @main() {
  %c41 = arith.constant 41 : i32
  %r = llvm.inline_asm "notaninstruction $0", "=r,r" %c41 : (i32) -> i32
  vector.print %r : i32
  return
}

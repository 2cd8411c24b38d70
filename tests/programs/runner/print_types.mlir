// printMemref for every element type MLIR's runner utilities print (i8 as characters, as
// mlir-runner does), complex values, and printMemrefShape.
func.func private @printMemrefI8(memref<*xi8>) attributes { llvm.emit_c_interface }
func.func private @printMemrefI16(memref<*xi16>) attributes { llvm.emit_c_interface }
func.func private @printMemrefF16(memref<*xf16>) attributes { llvm.emit_c_interface }
func.func private @printMemrefBF16(memref<*xbf16>) attributes { llvm.emit_c_interface }
func.func private @printMemrefInd(memref<*xindex>) attributes { llvm.emit_c_interface }
func.func private @printMemrefC32(memref<*xcomplex<f32>>) attributes { llvm.emit_c_interface }
func.func private @printMemrefC64(memref<*xcomplex<f64>>) attributes { llvm.emit_c_interface }
func.func private @printMemrefShapeI8(memref<*xi8>) attributes { llvm.emit_c_interface }
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %i8 = memref.alloca() : memref<2x3xi8>
  %i16 = memref.alloca() : memref<3xi16>
  %f16 = memref.alloca() : memref<3xf16>
  %bf16 = memref.alloca() : memref<3xbf16>
  %ind = memref.alloca() : memref<3xindex>
  %c32 = memref.alloca() : memref<2xcomplex<f32>>
  %c64 = memref.alloca() : memref<2xcomplex<f64>>
  scf.for %i = %c0 to %c3 step %c1 {
    %v = arith.index_cast %i : index to i8
    %n = arith.constant -65 : i8
    %w = arith.addi %v, %n : i8
    memref.store %w, %i8[%c0, %i] : memref<2x3xi8>
    %x = arith.constant 66 : i8
    %y = arith.addi %v, %x : i8
    memref.store %y, %i8[%c1, %i] : memref<2x3xi8>
    %s = arith.index_cast %i : index to i16
    %k = arith.constant -300 : i16
    %t = arith.muli %s, %k : i16
    memref.store %t, %i16[%i] : memref<3xi16>
    %fi = arith.index_cast %i : index to i32
    %ff = arith.sitofp %fi : i32 to f32
    %third = arith.constant 0.3333 : f32
    %fq = arith.mulf %ff, %third : f32
    %h = arith.truncf %fq : f32 to f16
    memref.store %h, %f16[%i] : memref<3xf16>
    %b = arith.truncf %fq : f32 to bf16
    memref.store %b, %bf16[%i] : memref<3xbf16>
    %big = arith.constant 1000000 : index
    %ii = arith.muli %i, %big : index
    memref.store %ii, %ind[%i] : memref<3xindex>
  }
  %re = arith.constant 1.5 : f32
  %im = arith.constant -2.0 : f32
  %z = complex.create %re, %im : complex<f32>
  memref.store %z, %c32[%c0] : memref<2xcomplex<f32>>
  memref.store %z, %c32[%c1] : memref<2xcomplex<f32>>
  %re64 = arith.constant 0.25 : f64
  %z64 = complex.create %re64, %re64 : complex<f64>
  memref.store %z64, %c64[%c0] : memref<2xcomplex<f64>>
  memref.store %z64, %c64[%c1] : memref<2xcomplex<f64>>
  %u1 = memref.cast %i8 : memref<2x3xi8> to memref<*xi8>
  call @printMemrefI8(%u1) : (memref<*xi8>) -> ()
  %u2 = memref.cast %i16 : memref<3xi16> to memref<*xi16>
  call @printMemrefI16(%u2) : (memref<*xi16>) -> ()
  %u3 = memref.cast %f16 : memref<3xf16> to memref<*xf16>
  call @printMemrefF16(%u3) : (memref<*xf16>) -> ()
  %u4 = memref.cast %bf16 : memref<3xbf16> to memref<*xbf16>
  call @printMemrefBF16(%u4) : (memref<*xbf16>) -> ()
  %u5 = memref.cast %ind : memref<3xindex> to memref<*xindex>
  call @printMemrefInd(%u5) : (memref<*xindex>) -> ()
  %u6 = memref.cast %c32 : memref<2xcomplex<f32>> to memref<*xcomplex<f32>>
  call @printMemrefC32(%u6) : (memref<*xcomplex<f32>>) -> ()
  %u7 = memref.cast %c64 : memref<2xcomplex<f64>> to memref<*xcomplex<f64>>
  call @printMemrefC64(%u7) : (memref<*xcomplex<f64>>) -> ()
  call @printMemrefShapeI8(%u1) : (memref<*xi8>) -> ()
  return
}

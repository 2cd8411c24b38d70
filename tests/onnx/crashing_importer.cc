// Stands in for libkiln_onnx_import in a test: an importer that dies of a signal, as a real one
// could on a model it does not diagnose. kiln must report it and carry on
// (src/onnx/onnx_program.cc).
#include <csignal>
#include <string>

#include "kiln/status.h"
#include "onnx_import/onnx_import_interface.h"

extern "C" __attribute__((visibility("default"))) void kiln_onnx_import_to_mlir(
    const kiln::onnx_import::ImportRequest&, kiln::Result<std::string>*) {
  std::raise(SIGSEGV);
}

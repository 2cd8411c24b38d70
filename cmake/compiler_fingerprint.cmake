# Writes OUT: a header naming a digest of the sources that generate code (kiln's compiler, its
# pass pipeline, the ONNX importer). The digest is part of every cache key, so an entry compiled by
# a build whose code generation differs is never served, even under the same version number.
file(GLOB sources ${ROOT}/src/compiler_cpu/* ${ROOT}/src/onnx_import/* ${ROOT}/src/backend/cpu/pipeline.*)
list(SORT sources)
set(all "")
foreach(source IN LISTS sources)
  file(SHA256 ${source} digest)
  string(APPEND all "${digest}")
endforeach()
string(SHA256 all "${all}")
string(SUBSTRING "${all}" 0 16 short)
set(text "// Generated at build time (cmake/compiler_fingerprint.cmake).\n#pragma once\n#define KILN_COMPILER_FINGERPRINT \"${short}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()

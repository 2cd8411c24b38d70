// Serialised executables: round trip in one process, load in a fresh process without the compiler,
// and damaged bytes rejected, never run.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "backend/cpu/host_features.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/npy.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

bool same_bytes(const Buffer& a, const Buffer& b) {
  return a.type() == b.type() && std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(SerializeTest, RoundTripInProcessGivesIdenticalResults) {
  auto exe = compile_file(program_path("matmul_odd.mlir"), EffortLevel::kO2);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  std::string bytes = shared_client().serialize(**exe);
  auto loaded = shared_client().deserialize(bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->info().effort_level, "O2");
  EXPECT_EQ((*loaded)->info().timings.passes_ms, (*exe)->info().timings.passes_ms);
  EXPECT_EQ((*loaded)->entry_points().size(), 1u);
  EXPECT_EQ((*loaded)->serialize(), bytes);
  Buffer a = random_f32({37, 53}, 1), b = random_f32({53, 29}, 2);
  auto want = (*exe)->execute("matmul", {a, b});
  auto got = (*loaded)->execute("matmul", {a, b});
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_TRUE(same_bytes((*want)[0], (*got)[0]));
}

TEST(SerializeTest, FreshProcessLoadsAndRunsWithoutTheCompiler) {
  TempDir dir;
  auto exe = compile_file(program_path("softmax.mlir"), EffortLevel::kO2);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  write_file(dir.file("softmax.kx"), (*exe)->serialize());
  Buffer x = random_f32({6, 33}, 3);
  ASSERT_TRUE(write_npy(dir.file("x.npy"), x).ok());
  auto want = (*exe)->execute("softmax", {x});
  ASSERT_TRUE(want.ok());

  ProcessResult probe = run_process(
      {KILN_LOAD_PROBE, dir.file("softmax.kx"), "softmax", dir.file("out"), dir.file("x.npy")});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  EXPECT_NE(probe.out.find("libMLIR mapped: no"), std::string::npos) << probe.out;
  EXPECT_NE(probe.out.find("libLLVM mapped: no"), std::string::npos) << probe.out;
  auto got = read_npy(dir.file("out0.npy"));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(same_bytes((*want)[0], *got));
}

TEST(SerializeTest, EveryFlippedByteIsRejected) {
  auto exe = compile_file(program_path("reductions.mlir"), EffortLevel::kO1);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  std::string bytes = (*exe)->serialize();
  // Every byte of the header and metadata, then a stride through the code.
  for (size_t i = 0; i < bytes.size(); i += (i < 2048 ? 1 : 97)) {
    std::string damaged = bytes;
    damaged[i] ^= 0x5a;
    auto loaded = Executable::deserialize(damaged);
    ASSERT_FALSE(loaded.ok()) << "flipping byte " << i << " went unnoticed";
  }
}

TEST(SerializeTest, TruncatedAndForeignBytesAreRejectedWithClearErrors) {
  auto exe = compile_file(program_path("reductions.mlir"), EffortLevel::kO1);
  ASSERT_TRUE(exe.ok());
  std::string bytes = (*exe)->serialize();
  auto truncated = Executable::deserialize(bytes.substr(0, bytes.size() / 2));
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), StatusCode::kCorruption);
  auto foreign = Executable::deserialize("module { func.func @f() { return } }");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("not a kiln executable"), std::string::npos);
  std::string future = bytes;
  future[8] = 99;  // format version
  auto versioned = Executable::deserialize(future);
  ASSERT_FALSE(versioned.ok());
  EXPECT_NE(versioned.status().message().find("format version 99"), std::string::npos);
}

// Checksums catch accidents; a crafted object has a valid one. dlopen would trust it, so the
// object's structure and its symbols are checked first, and a bad one is an error, not a crash.
// Where the value of dynamic symbol `name` lies in the ELF image `object` (0 when absent).
size_t symbol_file_offset(const std::string& object, const std::string& name) {
  const auto* header = reinterpret_cast<const Elf64_Ehdr*>(object.data());
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(object.data() + header->e_shoff);
  for (int i = 0; i < header->e_shnum; ++i) {
    if (sections[i].sh_type != SHT_DYNSYM) continue;
    const char* names = object.data() + sections[sections[i].sh_link].sh_offset;
    const auto* symbols = reinterpret_cast<const Elf64_Sym*>(object.data() + sections[i].sh_offset);
    for (size_t k = 0; k < sections[i].sh_size / sizeof(Elf64_Sym); ++k) {
      if (name != names + symbols[k].st_name) continue;
      const Elf64_Shdr& home = sections[symbols[k].st_shndx];
      return home.sh_offset + (symbols[k].st_value - home.sh_addr);
    }
  }
  return 0;
}

TEST(SerializeTest, CodeOfAnotherGeneratedCodeContractIsRefusedBeforeItRuns) {
  auto exe = compile_file(program_path("reductions.mlir"), EffortLevel::kO1);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  std::string code = (*exe)->code_bytes();
  size_t at = symbol_file_offset(code, "_kiln_contract_version");
  ASSERT_NE(at, 0u) << "the executable records no contract version";
  uint32_t recorded = 0;
  std::memcpy(&recorded, &code[at], sizeof recorded);
  EXPECT_EQ(recorded, 1u);
  uint32_t other = 99;
  std::memcpy(&code[at], &other, sizeof other);
  std::string bytes = Executable::serialize_parts((*exe)->info(), (*exe)->entry_points(), code, {});
  auto loaded = Executable::deserialize(bytes);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("contract version 99; this kiln loads version 1"),
            std::string::npos)
      << loaded.status().message();
}

TEST(SerializeTest, CraftedCodeWithAValidChecksumIsRejectedBeforeDlopen) {
  auto exe = compile_file(program_path("reductions.mlir"), EffortLevel::kO1);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  std::string code = (*exe)->code_bytes();
  auto rejected = [&](std::string object, std::vector<EntryPoint> entries) {
    std::string bytes = Executable::serialize_parts((*exe)->info(), entries, object, {});
    Status checked = Executable::check_serialized(bytes);
    auto loaded = Executable::deserialize(bytes);
    EXPECT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption);
    EXPECT_EQ(checked.message(), loaded.status().message());
    return loaded.status().message();
  };
  auto entries = (*exe)->entry_points();
  EXPECT_EQ(Executable::check_serialized((*exe)->serialize()).code(), StatusCode::kOk);
  EXPECT_NE(rejected("garbage", entries).find("shorter than an ELF header"), std::string::npos);
  EXPECT_NE(rejected(code.substr(0, code.size() / 2), entries).find("outside the object"),
            std::string::npos);
  std::string other_machine = code;
  other_machine[18] = 0x28;  // e_machine: ARM
  EXPECT_NE(rejected(other_machine, entries).find("another machine type"), std::string::npos);
  std::string huge_table = code;
  std::memset(&huge_table[0x28], 0x7f, 7);  // e_shoff far past the end
  EXPECT_NE(rejected(huge_table, entries).find("section headers"), std::string::npos);
  // Metadata promising an entry the code does not have.
  entries.push_back(entries[0]);
  entries.back().name = "not_in_the_code";
  EXPECT_NE(rejected(code, entries).find("does not define _kiln_entry_not_in_the_code"),
            std::string::npos);
}

TEST(InputFormatTest, BytecodeCompilesLikeText) {
  TempDir dir;
  std::string bytecode = dir.file("softmax.mlirbc");
  ProcessResult opt =
      run_process({MLIR_OPT, program_path("softmax.mlir"), "--emit-bytecode", "-o", bytecode});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  auto from_text = compile_file(program_path("softmax.mlir"), EffortLevel::kO1);
  auto from_bytecode = compile_file(bytecode, EffortLevel::kO1);
  ASSERT_TRUE(from_text.ok() && from_bytecode.ok()) << from_bytecode.status().to_string();
  Buffer x = random_f32({6, 33}, 4);
  auto a = (*from_text)->execute("softmax", {x});
  auto b = (*from_bytecode)->execute("softmax", {x});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(same_bytes((*a)[0], (*b)[0]));
}

TEST(DisabledPassTest, DisabledPassesReallyLeaveThePipeline) {
  // Without the loop lowering, linalg ops survive and the compile fails naming them.
  auto source = ModuleSource::from_file(program_path("matmul_odd.mlir"));
  ASSERT_TRUE(source.ok());
  CompileOptions options;
  options.optimization_level = EffortLevel::kO1;
  options.disabled_passes = {"convert-linalg-to-parallel-loops"};
  auto exe = shared_client().compile(*source, options);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().message().find("linalg."), std::string::npos) << exe.status().message();

  // Without elementwise fusion, the two generics of the chain stay two loops nests (seen in the
  // IR dump), and the result is unchanged.
  TempDir dumps;
  ASSERT_TRUE(config::set("KILN_DUMP_IR_TO", dumps.path()).ok());
  auto chain = ModuleSource::from_file(program_path("elementwise.mlir"));
  options.disabled_passes = {};
  auto fused = shared_client().compile(*chain, options);
  auto fused_ir = read_file(dumps.file(file_name_for_module("module") + ".1-bufferized.mlir"));
  options.disabled_passes = {"linalg-fuse-elementwise-ops"};
  auto unfused = shared_client().compile(*chain, options);
  auto unfused_ir = read_file(dumps.file(file_name_for_module("module") + ".1-bufferized.mlir"));
  ASSERT_TRUE(config::set("KILN_DUMP_IR_TO", "").ok());
  ASSERT_TRUE(fused.ok() && unfused.ok() && fused_ir.ok() && unfused_ir.ok());
  auto count = [](const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find("linalg.generic"); at != std::string::npos;
         at = text.find("linalg.generic", at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(*fused_ir), 1u);
  EXPECT_EQ(count(*unfused_ir), 2u);
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// A program compiled at O2 as it is and without the pipeline step `step`: the executables and
// their bufferized IR (as KILN_DUMP_IR_TO writes it).
struct WithAndWithout {
  Result<std::shared_ptr<Executable>> with = internal_error("not compiled"),
                                      without = internal_error("not compiled");
  std::string with_ir, without_ir;
};

WithAndWithout compile_with_and_without(const std::string& program, const std::string& step) {
  WithAndWithout out;
  TempDir dumps;
  EXPECT_TRUE(config::set("KILN_DUMP_IR_TO", dumps.path()).ok());
  auto source = ModuleSource::from_file(program_path(program));
  EXPECT_TRUE(source.ok());
  if (!source.ok()) return out;
  std::string dumped = dumps.file(file_name_for_module("module") + ".1-bufferized.mlir");
  CompileOptions options;
  options.optimization_level = EffortLevel::kO2;
  out.with = shared_client().compile(*source, options);
  Result<std::string> with_ir = read_file(dumped);
  out.with_ir = with_ir.ok() ? *with_ir : "";
  options.disabled_passes = {step};
  out.without = shared_client().compile(*source, options);
  Result<std::string> without_ir = read_file(dumped);
  out.without_ir = without_ir.ok() ? *without_ir : "";
  EXPECT_TRUE(config::set("KILN_DUMP_IR_TO", "").ok());
  EXPECT_TRUE(out.with.ok() && out.without.ok());
  return out;
}

TEST(VectorizationTest, ConvolutionsAreVectorisedFromO2AndTheStepCanBeDisabled) {
  WithAndWithout c = compile_with_and_without("conv2d.mlir", "kiln-vectorize-convolutions");
  ASSERT_TRUE(c.with.ok() && c.without.ok());
  EXPECT_NE(c.with_ir.find("vector.contract"), std::string::npos);
  EXPECT_EQ(c.with_ir.find("linalg.conv_2d_nhwc_hwcf"), std::string::npos);
  EXPECT_EQ(c.without_ir.find("vector.contract"), std::string::npos);
  EXPECT_NE(c.without_ir.find("linalg.conv_2d_nhwc_hwcf"), std::string::npos);
}

// From O2 the kernel after a product is tiled and each tile computes its piece of the product
// (fill, matmul, kernel in one scf.forall): two of the program's three products qualify (the
// third has no tile size). Without the step the results are the same.
TEST(VectorizationTest, ProductEpiloguesRunInsideTheProductsTilesAndTheStepCanBeDisabled) {
  WithAndWithout c = compile_with_and_without("matmul_epilogue.mlir", "kiln-fuse-epilogues");
  ASSERT_TRUE(c.with.ok() && c.without.ok());
  const std::string &fused_ir = c.with_ir, &apart_ir = c.without_ir;
  auto& fused = c.with;
  auto& apart = c.without;
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(fused_ir, "scf.forall"), 2u);
  EXPECT_EQ(count(apart_ir, "scf.forall"), 0u);
  // Inside a tile the product writes the output's own slice: no buffer of its own.
  EXPECT_EQ(count(fused_ir, "memref.alloc("), count(apart_ir, "memref.alloc(") - 2);
  Buffer a = random_f32({96, 24}, 61), b = random_f32({24, 200}, 62),
         bias = random_f32({96, 1}, 63);
  auto x = (*fused)->execute("bias_relu", {a, b, bias});
  auto y = (*apart)->execute("bias_relu", {a, b, bias});
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_TRUE(same_bytes((*x)[0], (*y)[0]));
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

TEST(CpuFeatureTest, KilnsHostDetectionAgreesWithLlvmsOnEveryCheckableFeature) {
  auto exe = compile_file(program_path("matmul_odd.mlir"), EffortLevel::kO2);
  ASSERT_TRUE(exe.ok());
  const std::string& features = (*exe)->info().target_features;
  ASSERT_FALSE(features.empty());
  EXPECT_TRUE(cpu::missing_features(features).empty());
  for (const std::string& name : cpu::host_features())
    EXPECT_NE(features.find("+" + name), std::string::npos) << name << " seen by kiln, not LLVM";
}

TEST(CpuFeatureTest, CodeNeedingFeaturesThisMachineLacksIsRefusedNamingThem) {
  std::string absent;
  for (const std::string& name : cpu::checkable_features())
    if (!cpu::host_features().count(name)) absent = name;
  if (absent.empty()) GTEST_SKIP() << "this CPU has every feature kiln can check";
  auto exe = compile_file(program_path("reductions.mlir"), EffortLevel::kO1);
  ASSERT_TRUE(exe.ok());
  ExecutableInfo forged = (*exe)->info();
  forged.target_features += ",+" + absent;
  auto loaded = Executable::load(forged, (*exe)->entry_points(), (*exe)->code_bytes());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("needs CPU features this machine lacks: " + absent),
            std::string::npos)
      << loaded.status().message();
}

}  // namespace
}  // namespace kiln::testing

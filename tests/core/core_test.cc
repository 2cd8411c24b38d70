// Core pieces without the compiler: effort levels, .npy files, the pipeline list, the client.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "backend/cpu/pipeline.h"
#include "compile/text_canonical.h"
#include "core/digest.h"
#include "core/tensor_memory.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/npy.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

TEST(EffortLevelTest, ParsesNamesAndNumbers) {
  EXPECT_EQ(*parse_effort_level("O0"), EffortLevel::kO0);
  EXPECT_EQ(*parse_effort_level("19"), EffortLevel::kO1);
  EXPECT_EQ(*parse_effort_level("O3"), EffortLevel::kO3);
  EXPECT_EQ(*parse_effort_level("UNKNOWN"), EffortLevel::kUnknown);
  auto bad = parse_effort_level("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown effort level 'fast'"), std::string::npos);
  EXPECT_EQ(resolve_effort_level(EffortLevel::kUnknown), EffortLevel::kO2);
}

TEST(BufferTest, AllocationFailuresAreErrorsNamingTheSize) {
  Result<Buffer> small = Buffer::allocate(DType::kI16, {3, 5});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->byte_size(), 30u);
  EXPECT_EQ(small->as<int16_t>()[14], 0);

  Result<Buffer> overflow = Buffer::allocate(DType::kF64, {1LL << 32, 1LL << 32});
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(overflow.status().message(), ::testing::HasSubstr("needs more than 2^64 bytes"));

  Result<Buffer> huge = Buffer::allocate(DType::kF32, {1LL << 22, 1LL << 22});  // 64 TiB
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(),
              ::testing::HasSubstr("cannot allocate 70368744177664 bytes"));

  EXPECT_FALSE(Buffer::allocate(DType::kF32, {4, kDynamicDim}).ok());
}

// Shapes from files and models are untrusted: counting their elements never overflows.
TEST(BufferTest, ElementCountsOfEmptyAndHugeShapes) {
  EXPECT_EQ(element_count({}), 1);
  EXPECT_EQ(element_count({3, 0, 5}), 0);
  EXPECT_EQ(element_count({int64_t{1} << 40, int64_t{1} << 40, 0}), 0);
  EXPECT_EQ(element_count({int64_t{1} << 40, int64_t{1} << 40}), INT64_MAX);

  Result<Buffer> empty = Buffer::allocate(DType::kF32, {7, 0});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->element_count(), 0);
  EXPECT_EQ(empty->byte_size(), 0u);
}

TEST(NpyTest, RoundTripsEveryDtype) {
  TempDir dir;
  for (DType d :
       {DType::kF32, DType::kF64, DType::kI1, DType::kI8, DType::kI16, DType::kI32, DType::kI64}) {
    Buffer b(d, {3, 5});
    for (size_t i = 0; i < b.byte_size(); ++i) static_cast<uint8_t*>(b.data())[i] = uint8_t(i * 7);
    if (d == DType::kI1)
      for (int i = 0; i < 15; ++i) b.as<uint8_t>()[i] = i % 2;
    std::string path = dir.file(std::string(dtype_name(d)) + ".npy");
    ASSERT_TRUE(write_npy(path, b).ok());
    auto back = read_npy(path);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->type(), b.type());
    EXPECT_EQ(std::memcmp(back->data(), b.data(), b.byte_size()), 0) << dtype_name(d);
  }
}

TEST(NpyTest, RejectsUnsupportedAndDamagedFiles) {
  Buffer b(DType::kF32, {4});
  std::string bytes = encode_npy(b);
  auto truncated = parse_npy(bytes.substr(0, bytes.size() - 3), "x.npy");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("x.npy: .npy data holds 13 bytes"),
            std::string::npos);
  std::string big_endian = bytes;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  auto be = parse_npy(big_endian, "y.npy");
  ASSERT_FALSE(be.ok());
  EXPECT_NE(be.status().message().find("NumPy dtype '>f4' is not supported"), std::string::npos);
}

// A version-1 .npy file with this header text and data bytes.
std::string npy_with_header(const std::string& header, const std::string& data = "") {
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

TEST(NpyTest, AcceptsWhatNumPyWritesInAnyOfItsSpellings) {
  std::string four_floats(16, '\0');
  for (const char* header : {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }     \n",
                             "{'shape': (4,), 'fortran_order': False, 'descr': '<f4'}\n",
                             "{\"descr\": \"<f4\", \"fortran_order\": True, \"shape\": (4,)}",
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2)}"}) {
    auto parsed = parse_npy(npy_with_header(header, four_floats), "ok.npy");
    EXPECT_TRUE(parsed.ok()) << header << ": " << parsed.status().to_string();
  }
  auto scalar = parse_npy(
      npy_with_header("{'descr': '<i8', 'fortran_order': False, 'shape': ()}", std::string(8, 'x')),
      "s.npy");
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->shape().empty());
}

// Each of these once crashed kiln, allocated without bound, or was accepted and guessed at.
TEST(NpyTest, MalformedOrHostileHeadersAreClearErrorsBeforeAnyAllocation) {
  struct Case {
    std::string header;
    std::string data;
    std::string message;
  };
  std::vector<Case> cases = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999)}", "",
       "needs more than 2^64"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576)}", "",
       "needs 4398046511104"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-4,)}", "", "not a non-negative"},
      // Empty (a zero dimension) but with more elements than int64 counts before the zero: found
      // by fuzz_npy as a signed overflow in element_count.
      {"{'descr': '|i1', 'fortran_order': False, 'shape': (1007370955161, 25, 404000, 0)}", "",
       "more than 2^63 elements"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4)}", std::string(16, '\0'),
       "1-tuple without its comma"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", "",
       "unexpected or repeated key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (4,)}", "",
       "unexpected or repeated key 'descr'"},
      {"{'descr': '<f4', 'shape': (4,)}", "", "needs 'descr', 'fortran_order' and 'shape'"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,)}", "", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} trailing", "",
       "bytes after its closing"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (4,)}", "", "expects ',' or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (4,)}", "", "expects ':'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::string(40, '1') + ",)}", "",
       "too large"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}", std::string(16, '\0'),
       "Fortran-order"},
      {"", "", "does not start with '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)", "", "expects ',' or '}'"},
  };
  std::string many_dims = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 40; ++i) many_dims += "1, ";
  cases.push_back({many_dims + ")}", std::string(4, '\0'), "more than 32 dimensions"});
  for (const Case& c : cases) {
    auto parsed = parse_npy(npy_with_header(c.header, c.data), "bad.npy");
    ASSERT_FALSE(parsed.ok()) << c.header;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("bad.npy: "));
    EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr(c.message)) << c.header;
  }
  // A header length past the end of the file.
  std::string cut = npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,)}");
  cut[8] = '\xff';
  cut[9] = '\xff';
  EXPECT_THAT(parse_npy(cut, "cut.npy").status().message(), ::testing::HasSubstr("truncated"));
}

// A cache entry of a few kilobytes with a valid checksum once made kiln allocate 4.2 GB: the size
// a frame declares is now checked against what its compressed bytes can plausibly hold.
TEST(ZstdTest, DeclaredSizesBeyondTheInputAreRefusedBeforeAllocating) {
  std::string zeros(size_t{256} << 20, '\0');
  std::string bomb = zstd_compress(zeros, 19);
  zeros.clear();
  zeros.shrink_to_fit();
  ASSERT_LT(bomb.size(), size_t{64} << 10);
  auto out = zstd_decompress(bomb, size_t{4} << 30);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(out.status().message(), ::testing::HasSubstr("declares 268435456 bytes"));
  std::string code;
  for (int i = 0; i < (1 << 20); ++i) code += char(i * 7 % 251);
  auto round_trip = zstd_decompress(zstd_compress(code), size_t{4} << 30);
  ASSERT_TRUE(round_trip.ok()) << round_trip.status().to_string();
  EXPECT_EQ(*round_trip, code);
}

// Reading a file holds its bytes once (a 45 MB model once cost 90 MB at its peak), and files whose
// size stat does not know (/proc) are still read whole.
TEST(FileTest, ReadsExactlyTheBytesWithoutOverallocating) {
  TempDir dir;
  std::string bytes;
  for (int i = 0; i < (3 << 20) + 17; ++i) bytes += char(i * 13 % 256);
  ASSERT_TRUE(write_file(dir.file("data"), bytes).ok());
  auto read = read_file(dir.file("data"));
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(*read, bytes);
  EXPECT_LT(read->capacity(), bytes.size() + 8192);
  auto block = read_file_bytes(dir.file("data"));
  ASSERT_TRUE(block.ok()) << block.status().to_string();
  EXPECT_EQ(block->view(), bytes);
  auto status = read_file("/proc/self/status");
  ASSERT_TRUE(status.ok());
  EXPECT_THAT(*status, ::testing::HasSubstr("VmRSS:"));
  auto status_block = read_file_bytes("/proc/self/status");
  ASSERT_TRUE(status_block.ok());
  EXPECT_THAT(std::string(status_block->view()), ::testing::HasSubstr("VmRSS:"));
  auto missing = read_file(dir.file("absent"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), ::testing::HasSubstr("cannot open"));
}

// Large tensor blocks are reused by later requests they fit (a program's next run finds its
// buffers again without page faults), and very large ones go back to the kernel when released.
TEST(TensorMemoryTest, LargeBlocksAreReusedAndHugeOnesReturned) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under AddressSanitizer every block comes from malloc (for its red zones)";
#endif
  TensorMemoryStats before = tensor_memory_stats();
  size_t large = (size_t{6} << 20) + 123;
  char* first = static_cast<char*>(allocate_tensor_memory(large, 64));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  first[0] = 1;
  first[large - 1] = 2;
  release_tensor_memory(first);
  char* again = static_cast<char*>(allocate_tensor_memory(large, 64));
  EXPECT_EQ(again, first) << "a released block of the same size is not reused";
  release_tensor_memory(again);
  TensorMemoryStats kept = tensor_memory_stats();
  EXPECT_EQ(kept.mapped_bytes - before.mapped_bytes, int64_t{8} << 20);  // whole huge pages

  size_t huge = size_t{40} << 20;
  void* big = allocate_tensor_memory(huge, 64);
  ASSERT_NE(big, nullptr);
  EXPECT_GE(tensor_memory_stats().mapped_bytes, kept.mapped_bytes + int64_t(huge));
  release_tensor_memory(big);
  EXPECT_EQ(tensor_memory_stats().mapped_bytes, kept.mapped_bytes);

  // Small blocks and unusual alignments come from malloc and are released the same way.
  void* small = allocate_tensor_memory(100, 128);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 128, 0u);
  release_tensor_memory(small);
  release_tensor_memory(nullptr);
}

TEST(PipelineTest, DisabledPassesAreLeftOut) {
  cpu::Pipeline full = cpu::build_pipeline(EffortLevel::kO2, {});
  std::string text = cpu::pipeline_text(full.tensor_passes);
  EXPECT_NE(text.find("linalg-fuse-elementwise-ops"), std::string::npos);
  EXPECT_TRUE(full.tile_and_vectorize);
  cpu::Pipeline cut = cpu::build_pipeline(
      EffortLevel::kO2, {"linalg-fuse-elementwise-ops", cpu::kTileAndVectorizeStep});
  EXPECT_EQ(cpu::pipeline_text(cut.tensor_passes).find("linalg-fuse-elementwise-ops"),
            std::string::npos);
  EXPECT_FALSE(cut.tile_and_vectorize);
}

TEST(PipelineTest, EffortLevelsPickVectorisationAndLlvmLevel) {
  EXPECT_FALSE(cpu::build_pipeline(EffortLevel::kO0, {}).tile_and_vectorize);
  EXPECT_FALSE(cpu::build_pipeline(EffortLevel::kO1, {}).tile_and_vectorize);
  EXPECT_EQ(cpu::build_pipeline(EffortLevel::kO0, {}).llvm_opt_level, 0);
  EXPECT_EQ(cpu::build_pipeline(EffortLevel::kO1, {}).llvm_opt_level, 1);
  EXPECT_EQ(cpu::build_pipeline(EffortLevel::kO2, {}).llvm_opt_level, 2);
  EXPECT_EQ(cpu::build_pipeline(EffortLevel::kO3, {}).llvm_opt_level, 3);
}

// libkiln is built with hidden visibility: a program that links it sees the public API (what
// include/kiln declares), the plugin interface libkiln_compiler uses (the pipeline), and the C
// functions generated code calls; internal helpers stay inside.
TEST(LibraryExportsTest, OnlyThePublicApiAndTheGeneratedCodeRuntimeAreVisible) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&parse_effort_level), &info), 0);
  std::string library = info.dli_fname;
  ASSERT_NE(library.find("libkiln.so"), std::string::npos) << library;

  std::string headers;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + "/include/kiln"))
    headers += *read_file(entry.path().string());
  FILE* nm = popen(("nm -D --defined-only -C '" + library + "'").c_str(), "r");
  ASSERT_NE(nm, nullptr);
  std::set<std::string> undeclared;
  int kiln_symbols = 0;
  char line[8192];
  // "ADDRESS T kiln::Name..." or "ADDRESS T kiln::ns::name(...)": the first name after kiln::
  // (a class or a function) must be declared in a public header.
  std::regex api_symbol(R"(^\S+ [TWBDVR] kiln::(?:cpu::)?(\w+))");
  while (fgets(line, sizeof line, nm) != nullptr) {
    std::cmatch m;
    if (!std::regex_search(line, m, api_symbol)) continue;
    ++kiln_symbols;
    std::string name = m[1];
    if (name == "build_pipeline" || name == "pipeline_text") continue;  // plugin interface
    if (headers.find(name) == std::string::npos) undeclared.insert(name);
  }
  pclose(nm);
  EXPECT_GT(kiln_symbols, 100);
  EXPECT_TRUE(undeclared.empty()) << "exported but not public: "
                                  << ::testing::PrintToString(undeclared);

  // Internal helpers are not reachable by name; the runtime generated code links against is.
  void* self = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(dlsym(self, "_ZN4kiln10sha256_hexB5cxx11ESt17basic_string_viewIcSt11char_traitsIcEE"),
            nullptr);
  for (const char* runtime : {"printMemrefF32", "memrefCopy", "_mlir_memref_to_llvm_alloc",
                              "_mlir_memref_to_llvm_free", "_mlir_apfloat_add", "printNewline"})
    EXPECT_NE(dlsym(self, runtime), nullptr) << runtime;
  dlclose(self);
}

TEST(ClientTest, DevicesAndPlatformVersion) {
  auto client = Client::create_cpu(4);
  ASSERT_TRUE(client.ok());
  ASSERT_EQ((*client)->devices().size(), 4u);
  EXPECT_EQ((*client)->devices()[3].id, 3);
  EXPECT_EQ((*client)->devices()[3].kind, "cpu");
  const std::string& pv = (*client)->platform_version();
  EXPECT_NE(pv.find(std::string("llvm ") + llvm_version()), std::string::npos);
  EXPECT_NE(pv.find(std::string("kiln ") + kiln_version()), std::string::npos);
  EXPECT_NE(pv.find("x86_64"), std::string::npos);
  // A digest of the code-generating sources: a build that generates different code has another
  // platform version, so none of its cache entries are served to this one (or back).
  std::smatch digest;
  EXPECT_TRUE(std::regex_search(pv, digest, std::regex("code generation [0-9a-f]{16}"))) << pv;
}

TEST(ClientTest, DeviceCountFromEnvironment) {
  ProcessResult r = run_process({kiln_binary(), "devices"}, {"KILN_CPU_DEVICE_COUNT=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("device 2: kind cpu, process 0"), std::string::npos) << r.out;
  ProcessResult bad = run_process({kiln_binary(), "devices"}, {"KILN_CPU_DEVICE_COUNT=lots"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("KILN_CPU_DEVICE_COUNT='lots'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

class CompileOptionsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    config::reset();
    set_profile_version_hook(nullptr);
  }
};

TEST_F(CompileOptionsTest, DeviceAssignmentShapeIsValidated) {
  auto ok = get_compile_options(2, 2, std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->device_assignment[1][0], 2);
  auto bad = get_compile_options(2, 2, std::vector<std::vector<int>>{{0, 1, 2}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              ::testing::HasSubstr("shape 1x3, but num_replicas is 2 and num_partitions is 2"));
  auto flat = get_compile_options(3, 1, std::vector<int>{4, 5, 6});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->device_assignment.size(), 3u);
  auto flat_bad = get_compile_options(2, 2, std::vector<int>{0, 1});
  ASSERT_FALSE(flat_bad.ok());
  EXPECT_THAT(flat_bad.status().message(), ::testing::HasSubstr("num_partitions is 2"));
}

// Mirrors JAX's compile options tests: effort-level overrides move onto the options; a name the
// compiler does not know is refused ("No such compile option"), never silently keyed.
TEST_F(CompileOptionsTest, EffortLevelOverridesMoveOntoTheOptionsAndUnknownNamesAreRefused) {
  auto o = get_compile_options(1, 1, std::vector<std::vector<int>>{},
                               {{"optimization_level", "O3"},
                                {"memory_fitting_level", "19"},
                                {"disabled_passes", "canonicalize"}});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->optimization_level, EffortLevel::kO3);
  EXPECT_EQ(o->memory_fitting_level, EffortLevel::kO1);
  EXPECT_EQ(o->disabled_passes, std::vector<std::string>{"canonicalize"});
  EXPECT_TRUE(o->env_option_overrides.empty());
  auto bad =
      get_compile_options(1, 1, std::vector<std::vector<int>>{}, {{"optimization_level", "O9"}});
  EXPECT_FALSE(bad.ok());
  auto unknown = get_compile_options(1, 1, std::vector<std::vector<int>>{}, {{"zeta", "1"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), ::testing::HasSubstr("No such compile option: 'zeta'"));
}

TEST_F(CompileOptionsTest, DisableMostOptimizationsAndRematFlagKeepTheUsersPasses) {
  ASSERT_TRUE(config::set("KILN_DISABLE_MOST_OPTIMIZATIONS", "true").ok());
  ASSERT_TRUE(config::set("KILN_COMPILER_ENABLE_REMAT_PASS", "false").ok());
  auto o = get_compile_options(1, 1, std::vector<std::vector<int>>{},
                               {{"disabled_passes", " canonicalize , lower-affine,canonicalize"}});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->optimization_level, EffortLevel::kO0);
  EXPECT_EQ(o->disabled_passes, (std::vector<std::string>{"canonicalize", "lower-affine",
                                                          "linalg-fuse-elementwise-ops"}));
}

// Mirrors the seed's profile-version precedence: a positive flag wins; else the hook's version,
// unless the hook gives 0 (an error of the hook's); no hook, or 0, means "do not retrieve" (-1).
TEST_F(CompileOptionsTest, ProfileVersionPositiveFlagBeatsHookBeatsNone) {
  auto version = [] {
    return get_compile_options(1, 1, std::vector<std::vector<int>>{})->profile_version;
  };
  EXPECT_EQ(version(), kNoProfileDontRetrieve);
  set_profile_version_hook([] { return int64_t{7}; });
  EXPECT_EQ(version(), 7);
  ASSERT_TRUE(config::set("KILN_PROFILE_VERSION", "-1").ok());
  EXPECT_EQ(version(), 7) << "only a positive flag overrides the hook";
  ASSERT_TRUE(config::set("KILN_PROFILE_VERSION", "5").ok());
  EXPECT_EQ(version(), 5);
  ASSERT_TRUE(config::set("KILN_PROFILE_VERSION", "0").ok());
  set_profile_version_hook([] { return int64_t{0}; });
  EXPECT_EQ(version(), kNoProfileDontRetrieve);
  set_profile_version_hook(nullptr);
}

TEST_F(CompileOptionsTest, DetailedLoggingFollowsTheOpCountBound) {
  EXPECT_FALSE(
      get_compile_options(1, 1, std::vector<std::vector<int>>{}, {}, "", 9)->detailed_logging);
  EXPECT_TRUE(
      get_compile_options(1, 1, std::vector<std::vector<int>>{}, {}, "", 10)->detailed_logging);
}

// ---- the canonical text form behind cache keys ----------------------------------------------

std::string canonical(const std::string& text, bool keep_locations = false) {
  auto c = canonicalize_mlir_text(text, keep_locations);
  EXPECT_TRUE(c.has_value()) << text;
  return c ? c->text : "";
}

TEST(TextCanonicalTest, LayoutCommentsLocationContentsAndNamesDoNotMatter) {
  std::string a =
      "#loc = loc(\"a.py\":1:1)\nmodule @m {\n  func.func @f(%a: f32, %b: f32) -> f32 {\n"
      "    %r = arith.addf %a, %b : f32 loc(#loc)\n    return %r : f32 loc(\"a.py\":9:9)\n  }\n}\n";
  std::string b =
      "#loc = loc(\"m.py\":7:3)\n// comment\nmodule @m {\nfunc.func @f(%x: f32,\n"
      "   %y: f32) -> f32 {\n  %sum = arith.addf %x, %y : f32 loc(#loc)\n"
      "  return %sum : f32 loc(fused[\"m.py\":2:3, \"m.py\":4:5])\n}\n}";
  EXPECT_EQ(canonical(a), canonical(b));
  EXPECT_NE(canonical(a, true), canonical(b, true));
  EXPECT_EQ(canonicalize_mlir_text(b, false)->module_name, "m");
}

// Each of these once shared a key with a different program (or a valid one with a rejected one).
TEST(TextCanonicalTest, LocationsAreRecognisedOnlyWhereTheGrammarPutsThem) {
  // A symbol named @loc is a call, not a location: its operands stay.
  std::string defs = "%a = arith.constant 1.0 : f32\n%b = arith.constant 2.0 : f32\n";
  EXPECT_NE(canonical(defs + "%r = func.call @loc(%a, %b) : (f32, f32) -> f32"),
            canonical(defs + "%r = func.call @loc(%b, %a) : (f32, f32) -> f32"));
  // A location where MLIR allows none still counts.
  EXPECT_NE(canonical("%r = arith.addf %a, %b : f32"),
            canonical("%r = arith.addf loc(\"x\":1:1) %a, %b : f32"));
  EXPECT_NE(canonical("%r = arith.addf %a, %b : f32"),
            canonical("%r = arith.addf %a, %b : f32 loc(\"x\":1:1)"));
  // Only well-formed contents are dropped: MLIR rejects these.
  EXPECT_NE(canonical("return loc(\"x\":1:2)"), canonical("return loc(bogus)"));
  EXPECT_NE(canonical("return loc(\"x\":1:2)"), canonical("return loc(\"x\":1)"));
  EXPECT_NE(canonical("return loc(\"x\":1:2)"), canonical("return loc(\"x\":99999999999:2)"));
  // Alias references stay (an undefined alias must still fail).
  EXPECT_NE(canonical("return loc(#loc1)"), canonical("return loc(#loc2)"));
  // A location as an attribute value is data.
  EXPECT_NE(canonical("\"t.op\"() {where = loc(\"a\":1:1)} : () -> ()"),
            canonical("\"t.op\"() {where = loc(\"b\":1:1)} : () -> ()"));
  EXPECT_NE(canonical("#l = loc(\"a\":1:1)\n\"t.op\"() {where = #l} : () -> ()"),
            canonical("#l = loc(\"b\":1:1)\n\"t.op\"() {where = #l} : () -> ()"));
  // Dialect attribute and type bodies are the dialect's: copied as they are.
  EXPECT_NE(canonical("!t.ty<%a loc(\"x\")>"), canonical("!t.ty<%b loc(\"y\")>"));
}

TEST(TextCanonicalTest, AnyChangeToTheProgramChangesTheForm) {
  std::string base =
      "func.func @f(%a: f32, %b: f32) -> f32 {\n  %r = arith.subf %a, %b : f32\n"
      "  return %r : f32\n}\n";
  auto variant = [&](const std::string& from, const std::string& to) {
    std::string v = base;
    v.replace(v.find(from), from.size(), to);
    return canonical(v);
  };
  EXPECT_NE(canonical(base), variant("subf %a, %b", "subf %b, %a"));  // operands swapped
  EXPECT_NE(canonical(base), variant("subf", "addf"));
  EXPECT_NE(canonical(base), variant("@f", "@g"));  // symbols are not renamed
  EXPECT_NE(canonical(base), variant("f32 {", "f64 {"));
  EXPECT_NE(canonical("%c = arith.constant -1 : i32"), canonical("%c = arith.constant 1 : i32"));
  // Strings keep their spaces; words keep the space between them.
  EXPECT_NE(canonical("x = \"a b\""), canonical("x = \"ab\""));
  EXPECT_NE(canonical("i32 attributes"), canonical("i32attributes"));
  EXPECT_EQ(canonicalize_mlir_text(base, false)->module_name, "module");
}

TEST(TextCanonicalTest, InputTheScanCannotHandleIsLeftToMlir) {
  EXPECT_FALSE(canonicalize_mlir_text(std::string("ML\xefR\x00\x01", 6), false).has_value());
  EXPECT_FALSE(canonicalize_mlir_text("x = \"unterminated", false).has_value());
  EXPECT_FALSE(canonicalize_mlir_text("%r = op : f32 loc(\"a\":1:2) \"open", false).has_value());
  EXPECT_FALSE(canonicalize_mlir_text("x = \"bad \\q escape\"", false).has_value());
  EXPECT_EQ(canonicalize_mlir_text("#map = affine_map<(d0) -> (d0)>\nmodule @\"my model\" "
                                   "attributes {x} {\n}",
                                   false)
                ->module_name,
            "my model");
}

}  // namespace
}  // namespace kiln::testing

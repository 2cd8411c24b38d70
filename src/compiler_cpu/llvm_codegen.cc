#include "compiler_cpu/llvm_codegen.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backend/cpu/generated_code_contract.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/CodeGen/ReplaceWithVeclib.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/Transforms/Scalar/LowerMatrixIntrinsics.h"

namespace kiln::cpu {
namespace {

// Runs `cmd` (argv) and returns its exit status; output is captured into `output`.
Status run_command(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return internal_error("cannot run the linker '" + argv[0] + "': " + std::strerror(rc) +
                          "; install binutils");
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream log(log_path);
    std::stringstream text;
    text << log.rdbuf();
    return internal_error("linking the executable failed: " + text.str());
  }
  return Status();
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot read " + path);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Code for x86-64 Linux may call glibc's vector math library (libmvec, part of every glibc).
bool uses_libmvec(const llvm::Triple& triple) {
  return triple.getArch() == llvm::Triple::x86_64 && triple.isOSLinux();
}

}  // namespace

// Links one relocatable object into a shared object: the system linker for this machine's
// architecture, LLVM's lld for any other.
Result<std::string> link_shared_object(const std::vector<llvm::SmallVector<char, 0>>& objects,
                                       bool foreign) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-link-XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr)
    return io_error("cannot create a temporary directory for linking: " +
                    std::string(std::strerror(errno)));
  std::string dir = dir_template;
  std::string library_path = dir + "/module.so", log_path = dir + "/link.log";
  std::vector<std::string> object_paths;
  for (size_t i = 0; i < objects.size(); ++i) {
    object_paths.push_back(dir + "/module" + std::to_string(i) + ".o");
    std::ofstream out(object_paths.back(), std::ios::binary);
    out.write(objects[i].data(), static_cast<std::streamsize>(objects[i].size()));
    if (!out) return io_error("cannot write " + object_paths.back());
  }
  std::string linker = foreign ? "/usr/lib/llvm-22/bin/ld.lld" : "ld";
  if (foreign && access(linker.c_str(), X_OK) != 0)
    return unimplemented("linking code for another architecture needs LLVM's linker " + linker +
                         " (Debian package lld-22)");
  // -Bsymbolic: calls inside the module never resolve to same-named symbols of the host process.
  std::vector<std::string> argv = {linker, "-shared",     "-Bsymbolic", "--build-id=none",
                                   "-z",   "noexecstack", "-o",         library_path};
  argv.insert(argv.end(), object_paths.begin(), object_paths.end());
  // Vectorised math calls resolve in libmvec; --as-needed keeps it out when nothing uses it.
  if (!foreign) argv.insert(argv.end(), {"--as-needed", "-lmvec"});
  Status linked = run_command(argv, log_path);
  Result<std::string> library = linked.ok() ? read_file(library_path) : Result<std::string>(linked);
  for (const std::string& path : object_paths) std::remove(path.c_str());
  std::remove(library_path.c_str());
  std::remove(log_path.c_str());
  rmdir(dir.c_str());
  return library;
}

// Defines `_mlir_ciface_NAME` for each host callback: it gathers the descriptor pointers into an
// array and calls the function in slot `_kiln_cb_fn_NAME` with the site in `_kiln_cb_site_NAME`;
// the loader fills both slots.
Status add_host_callback_thunks(llvm::Module& module,
                                const std::vector<HostCallbackSignature>& callbacks) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr_type = llvm::PointerType::getUnqual(ctx);
  auto* dispatch_type =
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr_type, ptr_type}, false);
  for (const HostCallbackSignature& cb : callbacks) {
    llvm::Function* thunk = module.getFunction("_mlir_ciface_" + cb.name);
    if (thunk == nullptr) continue;  // declared but never called
    if (!thunk->isDeclaration())
      return internal_error("host callback '" + cb.name + "' already has a body");
    auto make_slot = [&](const std::string& name) {
      return new llvm::GlobalVariable(module, ptr_type, /*isConstant=*/false,
                                      llvm::GlobalValue::ExternalLinkage,
                                      llvm::ConstantPointerNull::get(ptr_type), name);
    };
    llvm::GlobalVariable* fn_slot = make_slot(callback_function_slot(cb.name));
    llvm::GlobalVariable* site_slot = make_slot(callback_site_slot(cb.name));
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", thunk));
    unsigned n = thunk->arg_size();
    auto* array_type = llvm::ArrayType::get(ptr_type, std::max(1u, n));
    llvm::Value* array = b.CreateAlloca(array_type);
    for (unsigned i = 0; i < n; ++i)
      b.CreateStore(thunk->getArg(i), b.CreateConstGEP2_32(array_type, array, 0, i));
    llvm::Value* fn = b.CreateLoad(ptr_type, fn_slot);
    llvm::Value* site = b.CreateLoad(ptr_type, site_slot);
    b.CreateCall(dispatch_type, fn, {site, array});
    b.CreateRetVoid();
  }
  return Status();
}

// Adds `void _kiln_entry_F(void** args)` for each entry F: loads each argument of the C interface
// wrapper `_mlir_ciface_F` through one pointer and calls it, so the runtime needs one call shape.
Status add_packed_entries(llvm::Module& module, const std::vector<EntryPoint>& entries) {
  llvm::LLVMContext& ctx = module.getContext();
  auto* ptr_type = llvm::PointerType::getUnqual(ctx);
  auto* packed_type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr_type}, false);
  for (const EntryPoint& entry : entries) {
    llvm::Function* target = module.getFunction("_mlir_ciface_" + entry.name);
    if (target == nullptr) return internal_error("no C interface for entry '" + entry.name + "'");
    auto* packed = llvm::Function::Create(packed_type, llvm::GlobalValue::ExternalLinkage,
                                          packed_entry_symbol(entry.name), module);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", packed));
    llvm::Value* args = packed->getArg(0);
    std::vector<llvm::Value*> call_args;
    for (unsigned i = 0; i < target->arg_size(); ++i) {
      llvm::Value* slot = b.CreateConstGEP1_64(ptr_type, args, i);
      llvm::Value* value_ptr = b.CreateLoad(ptr_type, slot);
      call_args.push_back(b.CreateLoad(target->getArg(i)->getType(), value_ptr));
    }
    llvm::CallInst* call = b.CreateCall(target, call_args);
    if (!call->getType()->isVoidTy()) {
      llvm::Value* slot = b.CreateConstGEP1_64(ptr_type, args, target->arg_size());
      b.CreateStore(call, b.CreateLoad(ptr_type, slot));
    }
    b.CreateRetVoid();
  }
  // The contract this code follows, for the loader to check (generated_code_contract.h).
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  new llvm::GlobalVariable(module, i32, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i32, kGeneratedCodeContract),
                           kContractVersionSymbol);
  // Only the packed entries, the slots and the contract version are the executable's interface;
  // everything else stays inside it.
  for (llvm::Function& f : module.functions()) {
    if (!f.isDeclaration() && !f.getName().starts_with(kEntryPrefix))
      f.setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  for (llvm::GlobalVariable& g : module.globals()) {
    if (!g.isDeclaration() && !g.getName().starts_with(kCallbackPrefix) &&
        !g.getName().starts_with(kProfilePrefix) && g.getName() != kContractVersionSymbol)
      g.setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  return Status();
}

// An LLVMContext diagnostic handler: distinct errors are collected for the compile's result,
// warnings and remarks dropped.
void collect_llvm_errors(const llvm::DiagnosticInfo* info, void* errors) {
  if (info->getSeverity() != llvm::DS_Error) return;
  std::string text;
  llvm::raw_string_ostream stream(text);
  llvm::DiagnosticPrinterRawOStream printer(stream);
  info->print(printer);
  // Unrolled code repeats the same inline assembly: one message for each distinct error.
  std::string& all = *static_cast<std::string*>(errors);
  if (all.find(text) == std::string::npos) all += text + "\n";
}

Status emit_object(llvm::Module& module, llvm::TargetMachine& machine, const std::string& triple,
                   llvm::SmallVector<char, 0>& object) {
  llvm::raw_svector_ostream object_stream(object);
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, object_stream, nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return internal_error("LLVM cannot emit object code for " + triple);
  codegen.run(module);
  return Status();
}

Result<std::unique_ptr<llvm::TargetMachine>> create_target_machine(int opt_level,
                                                                   const std::string& triple,
                                                                   const std::string& cpu,
                                                                   const std::string& features) {
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(llvm::Triple(triple), error);
  if (target == nullptr)
    return invalid_argument("no LLVM target for triple '" + triple + "': " + error);
  llvm::TargetOptions target_options;
  llvm::CodeGenOptLevel level = opt_level == 0   ? llvm::CodeGenOptLevel::None
                                : opt_level == 1 ? llvm::CodeGenOptLevel::Less
                                : opt_level == 2 ? llvm::CodeGenOptLevel::Default
                                                 : llvm::CodeGenOptLevel::Aggressive;
  if (opt_level <= 1) target_options.EnableFastISel = true;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      llvm::Triple(triple), cpu, features, target_options, llvm::Reloc::PIC_, std::nullopt, level));
  if (!machine) return internal_error("cannot create an LLVM target machine for " + triple);
  if (!machine->getMCSubtargetInfo()->isCPUStringValid(cpu))
    return invalid_argument("'" + cpu + "' is not a CPU LLVM knows for " + triple);
  return machine;
}

namespace {

// LLVM's matrix lowering reads its layout and contraction choices from command-line options only:
// set them from kiln's flags (part of the key) before every such compile, as mlir-runner would
// from its own command line. Compiles run one at a time.
void set_matrix_options() {
  auto& options = llvm::cl::getRegisteredOptions();
  auto set = [&](const char* name, const std::string& value) {
    auto it = options.find(name);
    if (it != options.end()) (void)it->second->addOccurrence(0, name, value);
  };
  set("matrix-default-layout", *config::get_string("KILN_MATRIX_DEFAULT_LAYOUT"));
  set("matrix-allow-contract", config::get_bool("KILN_MATRIX_ALLOW_CONTRACT") ? "true" : "false");
}

}  // namespace

void optimize(llvm::Module& module, llvm::TargetMachine& machine, int opt_level) {
  // Parallel loops are coroutines: even at O0 LLVM's coroutine passes must split them.
  bool has_coroutines = module.getFunction("llvm.coro.id") != nullptr;
  // Matrix intrinsics have no code generation of their own: LLVM lowers them to vector code
  // first, which its default pipelines do only when asked.
  bool has_matrix_intrinsics = std::any_of(module.begin(), module.end(), [](llvm::Function& f) {
    return f.getName().starts_with("llvm.matrix.");
  });
  if (opt_level == 0 && !has_coroutines && !has_matrix_intrinsics) return;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&machine);
  // glibc's vector math library lets the loop vectoriser turn expf, tanhf, logf... calls into
  // one call per vector (x86-64 Linux; registered before the defaults so it wins).
  llvm::Triple triple = module.getTargetTriple();
  llvm::TargetLibraryInfoImpl library_info(
      triple, uses_libmvec(triple) ? llvm::VectorLibrary::LIBMVEC : llvm::VectorLibrary::NoLibrary);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(library_info); });
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = opt_level == 1   ? llvm::OptimizationLevel::O1
                                  : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                   : llvm::OptimizationLevel::O3;
  if (has_matrix_intrinsics) {
    set_matrix_options();
    llvm::ModulePassManager matrix;
    matrix.addPass(llvm::createModuleToFunctionPassAdaptor(
        llvm::LowerMatrixIntrinsicsPass(/*Minimal=*/opt_level == 0)));
    matrix.run(module, mam);
  }
  if (opt_level == 0)
    builder.buildO0DefaultPipeline(llvm::OptimizationLevel::O0).run(module, mam);
  else
    builder.buildPerModuleDefaultPipeline(level).run(module, mam);
  // Vector math that was vector before LLVM (kiln's vectorised elementwise kernels) calls
  // libmvec too, instead of being split into one libm call per element.
  if (opt_level > 0 && uses_libmvec(triple)) {
    llvm::ModulePassManager veclib;
    veclib.addPass(llvm::createModuleToFunctionPassAdaptor(llvm::ReplaceWithVeclib()));
    veclib.run(module, mam);
  }
}

}  // namespace kiln::cpu

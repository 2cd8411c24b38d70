// An executable's serialised form: a fixed header, JSON metadata, then the shared object.
// Parsing checks everything before any code is mapped. No MLIR or LLVM.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "backend/cpu/executable_internal.h"
#include "kiln/executable.h"

namespace kiln {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'E', 'X', 'E', '1'};
constexpr uint32_t kFormatVersion = 1;

// Fixed-size header in front of the metadata and the shared object; all fields little-endian.
struct SerializedHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t metadata_size;
  uint64_t object_size;
  uint64_t checksum;  // XXH3-64 over metadata and object bytes
};
static_assert(sizeof(SerializedHeader) == 40);

nlohmann::json tensor_type_to_json(const TensorType& type) {
  nlohmann::json j{{"dtype", dtype_name(type.dtype)}, {"shape", type.shape}};
  if (type.scalar) j["scalar"] = true;
  return j;
}

Result<TensorType> tensor_type_from_json(const nlohmann::json& j) {
  KILN_ASSIGN_OR_RETURN(DType dtype, parse_dtype(j.at("dtype").get<std::string>()));
  return TensorType{dtype, j.at("shape").get<std::vector<int64_t>>(), j.value("scalar", false)};
}

Status tensor_types_from_json(const nlohmann::json& list, std::vector<TensorType>& out) {
  for (const auto& j : list) {
    KILN_ASSIGN_OR_RETURN(TensorType type, tensor_type_from_json(j));
    out.push_back(std::move(type));
  }
  return Status();
}

// The metadata a loader needs before it maps the code: signatures, target, callbacks, kernels.
nlohmann::json metadata_json(const ExecutableInfo& info,
                             const std::vector<EntryPoint>& entry_points,
                             const std::vector<HostCallbackSignature>& signatures) {
  nlohmann::json meta;
  meta["module_name"] = info.module_name;
  meta["platform_version"] = info.platform_version;
  meta["effort_level"] = info.effort_level;
  meta["target_triple"] = info.target_triple;
  meta["target_cpu"] = info.target_cpu;
  meta["target_features"] = info.target_features;
  meta["num_replicas"] = info.num_replicas;
  meta["replica_devices"] = info.replica_devices;
  meta["timings_ms"] = {{"parse", info.timings.parse_ms},
                        {"passes", info.timings.passes_ms},
                        {"llvm", info.timings.llvm_ms},
                        {"codegen", info.timings.codegen_ms}};
  nlohmann::json entries = nlohmann::json::array();
  for (const EntryPoint& e : entry_points) {
    nlohmann::json in = nlohmann::json::array(), out = nlohmann::json::array();
    for (const TensorType& t : e.inputs) in.push_back(tensor_type_to_json(t));
    for (const TensorType& t : e.outputs) out.push_back(tensor_type_to_json(t));
    entries.push_back(
        {{"name", e.name}, {"inputs", in}, {"outputs", out}, {"results_owned", e.results_owned}});
  }
  meta["entries"] = entries;
  nlohmann::json callbacks = nlohmann::json::array();
  for (const HostCallbackSignature& cb : signatures) {
    nlohmann::json args = nlohmann::json::array();
    for (const TensorType& t : cb.args) args.push_back(tensor_type_to_json(t));
    callbacks.push_back({{"name", cb.name}, {"args", args}});
  }
  meta["host_callbacks"] = callbacks;
  if (!info.kernels.empty()) {
    nlohmann::json kernels = nlohmann::json::array();
    for (const KernelInfo& k : info.kernels)
      kernels.push_back(
          {{"fingerprint", k.fingerprint}, {"name", k.name}, {"candidates", k.candidate_names}});
    meta["kernels"] = kernels;
  }
  return meta;
}

}  // namespace

std::string Executable::serialize() const {
  return serialize_parts(info_, entry_points_, code_bytes(), callbacks_);
}

std::string Executable::serialize_parts(const ExecutableInfo& info_,
                                        const std::vector<EntryPoint>& entry_points_,
                                        std::string_view code,
                                        const std::vector<HostCallbackSignature>& callbacks_) {
  std::string metadata = metadata_json(info_, entry_points_, callbacks_).dump();

  SerializedHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.format_version = kFormatVersion;
  header.metadata_size = metadata.size();
  header.object_size = code.size();
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, metadata.data(), metadata.size());
  XXH3_64bits_update(state, code.data(), code.size());
  header.checksum = XXH3_64bits_digest(state);
  XXH3_freeState(state);

  std::string out;
  out.reserve(sizeof(header) + metadata.size() + code.size());
  out.append(reinterpret_cast<const char*>(&header), sizeof(header));
  out += metadata;
  out += code;
  return out;
}

namespace {

// A serialised executable taken apart and checked, but not loaded.
struct ParsedExecutable {
  ExecutableInfo info;
  std::vector<EntryPoint> entries;
  std::vector<HostCallbackSignature> callbacks;
  std::string_view object;
};

// Fills `parsed` from the metadata; a missing or mistyped field throws (the caller's corruption).
Status read_metadata(const nlohmann::json& meta, ParsedExecutable& parsed) {
  ExecutableInfo& info = parsed.info;
  std::vector<EntryPoint>& entries = parsed.entries;
  std::vector<HostCallbackSignature>& callbacks = parsed.callbacks;
  info.module_name = meta.at("module_name").get<std::string>();
  info.platform_version = meta.at("platform_version").get<std::string>();
  info.effort_level = meta.at("effort_level").get<std::string>();
  info.target_triple = meta.value("target_triple", std::string());
  info.target_cpu = meta.at("target_cpu").get<std::string>();
  info.target_features = meta.at("target_features").get<std::string>();
  info.num_replicas = meta.value("num_replicas", 1);
  info.replica_devices = meta.value("replica_devices", std::vector<int>{0});
  const auto& t = meta.at("timings_ms");
  info.timings = {t.at("parse").get<double>(), t.at("passes").get<double>(),
                  t.at("llvm").get<double>(), t.at("codegen").get<double>()};
  for (const auto& e : meta.at("entries")) {
    EntryPoint entry;
    entry.name = e.at("name").get<std::string>();
    entry.results_owned = e.at("results_owned").get<bool>();
    KILN_RETURN_IF_ERROR(tensor_types_from_json(e.at("inputs"), entry.inputs));
    KILN_RETURN_IF_ERROR(tensor_types_from_json(e.at("outputs"), entry.outputs));
    entries.push_back(std::move(entry));
  }
  for (const auto& c : meta.value("host_callbacks", nlohmann::json::array())) {
    HostCallbackSignature cb;
    cb.name = c.at("name").get<std::string>();
    KILN_RETURN_IF_ERROR(tensor_types_from_json(c.at("args"), cb.args));
    callbacks.push_back(std::move(cb));
  }
  for (const auto& k : meta.value("kernels", nlohmann::json::array())) {
    KernelInfo kernel;
    kernel.fingerprint = k.at("fingerprint").get<uint64_t>();
    kernel.name = k.at("name").get<std::string>();
    kernel.candidate_names = k.at("candidates").get<std::vector<std::string>>();
    info.kernels.push_back(std::move(kernel));
  }
  return Status();
}

Result<ParsedExecutable> parse_serialized(std::string_view bytes) {
  SerializedHeader header;
  if (bytes.size() < sizeof(header) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return invalid_argument("not a kiln executable (bad magic); compile one with `kiln compile`");
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.format_version != kFormatVersion) {
    return invalid_argument("kiln executable format version " +
                            std::to_string(header.format_version) +
                            " is not supported (this kiln "
                            "reads version " +
                            std::to_string(kFormatVersion) + "); recompile it");
  }
  if (header.reserved != 0) return corruption("kiln executable header is damaged");
  uint64_t body = bytes.size() - sizeof(header);
  if (header.metadata_size > body || header.object_size != body - header.metadata_size) {
    return corruption("kiln executable is truncated or has trailing bytes");
  }
  std::string_view metadata = bytes.substr(sizeof(header), header.metadata_size);
  std::string_view object = bytes.substr(sizeof(header) + header.metadata_size);
  if (XXH3_64bits(bytes.data() + sizeof(header), body) != header.checksum) {
    return corruption("kiln executable checksum mismatch: the bytes were damaged");
  }
  ParsedExecutable parsed;
  parsed.object = object;
  try {
    KILN_RETURN_IF_ERROR(read_metadata(nlohmann::json::parse(metadata), parsed));
  } catch (const nlohmann::json::exception& e) {
    return corruption(std::string("kiln executable metadata is malformed: ") + e.what());
  }
  return parsed;
}

}  // namespace

Result<std::shared_ptr<Executable>> Executable::deserialize(std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(ParsedExecutable parsed, parse_serialized(bytes));
  return load(std::move(parsed.info), std::move(parsed.entries), parsed.object,
              std::move(parsed.callbacks));
}

Status Executable::check_serialized(std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(ParsedExecutable parsed, parse_serialized(bytes));
  return cpu::check_code_matches_metadata(parsed.info, parsed.entries, parsed.callbacks,
                                          parsed.object);
}

Result<std::string> Executable::serialized_code(std::string_view bytes) {
  KILN_ASSIGN_OR_RETURN(ParsedExecutable parsed, parse_serialized(bytes));
  return std::string(parsed.object);
}

Result<std::shared_ptr<Executable>> Executable::deserialize_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return invalid_argument("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    close(fd);
    return invalid_argument("not a kiln executable (empty or unreadable): " + path);
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return io_error("cannot map " + path + ": " + std::strerror(errno));
  auto result = deserialize(std::string_view(static_cast<const char*>(mapped), size));
  munmap(mapped, size);
  return result;
}

}  // namespace kiln

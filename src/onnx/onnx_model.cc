// The runtime's view of an ONNX model, read straight from protobuf's wire format: the interface,
// the bound weights and the structure digest. No protobuf or libonnx here (a warm cache hit must
// not load them); the importer (src/onnx_import) reads the model with the real protobuf classes.
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "core/digest.h"
#include "kiln/file.h"
#include "kiln/onnx.h"

namespace kiln {
namespace {

// Field numbers of onnx.proto (IR version 8) that kiln reads.
namespace field {
constexpr uint32_t kModelIrVersion = 1, kModelGraph = 7, kModelOpsetImport = 8;
constexpr uint32_t kOpsetDomain = 1, kOpsetVersion = 2;
constexpr uint32_t kGraphNode = 1, kGraphInitializer = 5, kGraphInput = 11, kGraphOutput = 12,
                   kGraphSparseInitializer = 15;
constexpr uint32_t kNodeInput = 1, kNodeOutput = 2, kNodeOpType = 4, kNodeDomain = 7;
constexpr uint32_t kValueName = 1, kValueType = 2;
constexpr uint32_t kTypeTensor = 1;
constexpr uint32_t kTensorTypeElemType = 1, kTensorTypeShape = 2;
constexpr uint32_t kShapeDim = 1, kDimValue = 1, kDimParam = 2;
constexpr uint32_t kTensorDims = 1, kTensorDataType = 2, kTensorFloatData = 4, kTensorInt32Data = 5,
                   kTensorInt64Data = 7, kTensorName = 8, kTensorRawData = 9,
                   kTensorDoubleData = 10, kTensorUint64Data = 11, kTensorExternalData = 13,
                   kTensorDataLocation = 14;
constexpr uint32_t kEntryKey = 1, kEntryValue = 2;
}  // namespace field

constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// One protobuf message's fields, in order. Any malformed byte sequence makes ok() false.
class WireReader {
 public:
  WireReader(std::string_view bytes, size_t base = 0) : bytes_(bytes), base_(base) {}

  // Advances to the next field; false at the end or on malformed input.
  bool next() {
    if (pos_ >= bytes_.size() || !ok_) return false;
    field_start_ = pos_;
    uint64_t tag;
    if (!varint(&tag)) return fail();
    number_ = static_cast<uint32_t>(tag >> 3);
    wire_type_ = static_cast<int>(tag & 7);
    if (number_ == 0) return fail();
    switch (wire_type_) {
      case kVarint:
        if (!varint(&value_)) return fail();
        break;
      case kFixed64:
        if (bytes_.size() - pos_ < 8) return fail();
        payload_ = bytes_.substr(pos_, 8);
        pos_ += 8;
        break;
      case kFixed32:
        if (bytes_.size() - pos_ < 4) return fail();
        payload_ = bytes_.substr(pos_, 4);
        pos_ += 4;
        break;
      case kLengthDelimited: {
        uint64_t length;
        if (!varint(&length) || length > bytes_.size() - pos_) return fail();
        payload_offset_ = pos_;
        payload_ = bytes_.substr(pos_, length);
        pos_ += length;
        break;
      }
      default:
        return fail();
    }
    return true;
  }
  bool ok() const { return ok_; }
  uint32_t number() const { return number_; }
  int wire_type() const { return wire_type_; }
  uint64_t value() const { return value_; }
  std::string_view payload() const { return payload_; }
  // Offsets in the whole file.
  size_t field_begin() const { return base_ + field_start_; }
  size_t field_end() const { return base_ + pos_; }
  size_t payload_begin() const { return base_ + payload_offset_; }
  WireReader nested() const { return WireReader(payload_, payload_begin()); }

  // Repeated int64 field, packed or not.
  bool append_int64s(std::vector<int64_t>* out) {
    if (wire_type_ == kVarint) {
      out->push_back(static_cast<int64_t>(value_));
      return true;
    }
    if (wire_type_ != kLengthDelimited) return fail();
    WireReader packed(payload_);
    while (packed.pos_ < packed.bytes_.size()) {
      uint64_t v;
      if (!packed.varint(&v)) return fail();
      out->push_back(static_cast<int64_t>(v));
    }
    return true;
  }

 private:
  bool varint(uint64_t* out) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) return false;
      uint8_t byte = static_cast<uint8_t>(bytes_[pos_++]);
      result |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) {
        *out = result;
        return true;
      }
    }
    return false;
  }
  bool fail() {
    ok_ = false;
    return false;
  }
  std::string_view bytes_;
  size_t base_ = 0, pos_ = 0, field_start_ = 0, payload_offset_ = 0;
  uint32_t number_ = 0;
  int wire_type_ = 0;
  uint64_t value_ = 0;
  std::string_view payload_;
  bool ok_ = true;
};

Status malformed(const std::string& name, const std::string& what) {
  return invalid_argument(name + ": error: not a valid ONNX model (" + what +
                          "); is the file complete? re-export it");
}

Result<OnnxValueInfo> read_value_info(WireReader reader, const std::string& model) {
  OnnxValueInfo info;
  while (reader.next()) {
    if (reader.number() == field::kValueName && reader.wire_type() == kLengthDelimited) {
      info.name = std::string(reader.payload());
    } else if (reader.number() == field::kValueType && reader.wire_type() == kLengthDelimited) {
      WireReader type = reader.nested();
      while (type.next()) {
        if (type.number() != field::kTypeTensor || type.wire_type() != kLengthDelimited) continue;
        WireReader tensor = type.nested();
        while (tensor.next()) {
          if (tensor.number() == field::kTensorTypeElemType && tensor.wire_type() == kVarint) {
            info.element_type = static_cast<int32_t>(tensor.value());
          } else if (tensor.number() == field::kTensorTypeShape &&
                     tensor.wire_type() == kLengthDelimited) {
            info.has_shape = true;
            WireReader shape = tensor.nested();
            while (shape.next()) {
              if (shape.number() != field::kShapeDim || shape.wire_type() != kLengthDelimited)
                continue;
              int64_t value = kDynamicDim;
              std::string param;
              WireReader dim = shape.nested();
              while (dim.next()) {
                if (dim.number() == field::kDimValue && dim.wire_type() == kVarint)
                  value = static_cast<int64_t>(dim.value());
                else if (dim.number() == field::kDimParam && dim.wire_type() == kLengthDelimited)
                  param = std::string(dim.payload());
              }
              if (!dim.ok()) return malformed(model, "bad dimension of '" + info.name + "'");
              if (value < 0) value = kDynamicDim;
              info.dims.push_back(value);
              info.dim_params.push_back(param);
            }
            if (!shape.ok()) return malformed(model, "bad shape of '" + info.name + "'");
          }
        }
        if (!tensor.ok()) return malformed(model, "bad type of '" + info.name + "'");
      }
      if (!type.ok()) return malformed(model, "bad type of '" + info.name + "'");
    }
  }
  if (!reader.ok()) return malformed(model, "bad value info");
  return info;
}

bool is_payload_field(uint32_t number) {
  switch (number) {
    case field::kTensorFloatData:
    case field::kTensorInt32Data:
    case field::kTensorInt64Data:
    case field::kTensorRawData:
    case field::kTensorDoubleData:
    case field::kTensorUint64Data:
    case field::kTensorExternalData:
    case field::kTensorDataLocation:
      return true;
    default:
      return false;
  }
}

bool safe_relative_path(const std::string& path) {
  if (path.empty() || path[0] == '/' || path.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

std::string onnx_element_type_name(int32_t type) {
  switch (static_cast<OnnxElementType>(type)) {
    case OnnxElementType::kFloat:
      return "float";
    case OnnxElementType::kUint8:
      return "uint8";
    case OnnxElementType::kInt8:
      return "int8";
    case OnnxElementType::kUint16:
      return "uint16";
    case OnnxElementType::kInt16:
      return "int16";
    case OnnxElementType::kInt32:
      return "int32";
    case OnnxElementType::kInt64:
      return "int64";
    case OnnxElementType::kString:
      return "string";
    case OnnxElementType::kBool:
      return "bool";
    case OnnxElementType::kFloat16:
      return "float16";
    case OnnxElementType::kDouble:
      return "double";
    case OnnxElementType::kUint32:
      return "uint32";
    case OnnxElementType::kUint64:
      return "uint64";
    case OnnxElementType::kBfloat16:
      return "bfloat16";
    default:
      return "type " + std::to_string(type);
  }
}

Result<DType> dtype_of_onnx(int32_t type) {
  switch (static_cast<OnnxElementType>(type)) {
    case OnnxElementType::kFloat:
      return DType::kF32;
    case OnnxElementType::kDouble:
      return DType::kF64;
    case OnnxElementType::kInt8:
      return DType::kI8;
    case OnnxElementType::kInt16:
      return DType::kI16;
    case OnnxElementType::kInt32:
      return DType::kI32;
    case OnnxElementType::kInt64:
      return DType::kI64;
    case OnnxElementType::kBool:
      return DType::kI1;
    default:
      return unimplemented("ONNX element type " + onnx_element_type_name(type) +
                           " is not supported by kiln (float, double, int8/16/32/64 and bool are)");
  }
}

bool onnx_initializer_is_bound(int32_t element_type, int64_t element_count, bool read_at_import) {
  bool floating = element_type == int32_t(OnnxElementType::kFloat) ||
                  element_type == int32_t(OnnxElementType::kDouble);
  return floating && element_count >= 2 && !read_at_import;
}

bool onnx_input_read_at_import(const std::string& op_type, int input_index) {
  // Floating inputs whose values shape the program (the others are integers, always folded).
  return op_type == "Resize" && (input_index == 1 || input_index == 2);
}

bool onnx_input_is_static_slot(const std::string& op_type, int k) {
  if (op_type == "Reshape" || op_type == "Unsqueeze" || op_type == "Squeeze" || op_type == "Tile" ||
      op_type == "Expand" || op_type == "Split" || op_type == "Trilu" || op_type == "TopK" ||
      op_type == "Upsample" || op_type.rfind("Reduce", 0) == 0)
    return k == 1;
  if (op_type == "Slice") return k >= 1 && k <= 4;
  if (op_type == "Clip" || op_type == "Pad" || op_type == "Dropout" || op_type == "OneHot")
    return k == 1 || k == 2;
  if (op_type == "Range") return k <= 2;
  if (op_type == "ConstantOfShape" || op_type == "HannWindow" || op_type == "HammingWindow" ||
      op_type == "BlackmanWindow")
    return k == 0;
  if (op_type == "Resize") return k >= 1 && k <= 3;
  if (op_type == "LSTM" || op_type == "GRU" || op_type == "RNN") return k == 4;  // sequence_lens
  return false;
}

bool is_onnx_file(const std::string& path) {
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) return true;
  std::ifstream file(path, std::ios::binary);
  char first = 0;
  return file.get(first) && looks_like_onnx(std::string_view(&first, 1));
}

Result<OnnxModel> OnnxModel::from_file(const std::string& path, bool fold_weights) {
  KILN_ASSIGN_OR_RETURN(FileBytes bytes, read_file_bytes(path));
  size_t slash = path.rfind('/');
  std::string directory = slash == std::string::npos ? "." : path.substr(0, slash);
  return parse(std::move(bytes), path, directory.empty() ? "/" : directory, fold_weights);
}

Result<OnnxModel> OnnxModel::from_bytes(std::string bytes, std::string name, std::string directory,
                                        bool fold_weights) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  FileBytes held{std::shared_ptr<const char>(owned, owned->data()), owned->size()};
  return parse(std::move(held), std::move(name), std::move(directory), fold_weights);
}

// Reads a model's protobuf in two passes over the graph (the nodes first, to know which
// initializers the importer reads and which values must be static), filling an OnnxModel.
class OnnxModelParser {
 public:
  OnnxModelParser(OnnxModel& model, bool fold_weights) : model_(model), fold_(fold_weights) {}

  Status parse() {
    std::string_view all = model_.bytes_.view();
    if (all.empty()) return malformed(model_.name_, "the file is empty");
    bool have_graph = false;
    WireReader top(all);
    while (top.next()) {
      if (top.number() == field::kModelIrVersion && top.wire_type() == kVarint) {
        model_.ir_version_ = static_cast<int64_t>(top.value());
      } else if (top.number() == field::kModelOpsetImport && top.wire_type() == kLengthDelimited) {
        KILN_RETURN_IF_ERROR(read_opset(top.nested()));
      } else if (top.number() == field::kModelGraph && top.wire_type() == kLengthDelimited) {
        have_graph = true;
        scan_nodes(top.nested());
        KILN_RETURN_IF_ERROR(read_graph(top.nested()));
      }
    }
    if (!top.ok()) return malformed(model_.name_, "bad protobuf framing at the top level");
    if (!have_graph) return malformed(model_.name_, "no graph");
    keep_real_inputs();
    KILN_ASSIGN_OR_RETURN(model_.structure_digest_, structure_digest(all));
    model_.fold_weights_ = fold_;
    return Status();
  }

 private:
  // One initializer as stored: its description, where its values are, and the byte ranges of
  // its value fields in the file.
  struct Initializer {
    OnnxWeight weight;
    OnnxModel::WeightPayload payload;
    std::vector<std::pair<size_t, size_t>> payload_ranges;
    bool external = false;
  };

  Status read_opset(WireReader opset) {
    std::string domain;
    int64_t version = 0;
    while (opset.next()) {
      if (opset.number() == field::kOpsetDomain && opset.wire_type() == kLengthDelimited)
        domain = std::string(opset.payload());
      else if (opset.number() == field::kOpsetVersion && opset.wire_type() == kVarint)
        version = static_cast<int64_t>(opset.value());
    }
    if (!opset.ok()) return malformed(model_.name_, "bad opset_import");
    if (domain == "ai.onnx") domain = "";
    model_.opsets_[domain] = version;
    return Status();
  }

  // The first pass over the nodes: which values the importer reads at import (initializers that
  // stay folded) and which must be static (static slots and what they are computed from).
  void scan_nodes(WireReader nodes) {
    // Which node produces each value, to follow static slots back to the graph's inputs.
    std::map<std::string, std::pair<std::string, std::vector<std::string>>> producers;
    while (nodes.next()) {
      if (nodes.number() != field::kGraphNode || nodes.wire_type() != kLengthDelimited) continue;
      std::string op_type;
      std::vector<std::string> node_inputs, node_outputs;
      WireReader node = nodes.nested();
      while (node.next()) {
        if (node.wire_type() != kLengthDelimited) continue;
        if (node.number() == field::kNodeInput) node_inputs.emplace_back(node.payload());
        if (node.number() == field::kNodeOutput) node_outputs.emplace_back(node.payload());
        if (node.number() == field::kNodeOpType) op_type = std::string(node.payload());
      }
      for (size_t k = 0; k < node_inputs.size(); ++k) {
        if (onnx_input_read_at_import(op_type, int(k))) read_at_import_.insert(node_inputs[k]);
        if (onnx_input_is_static_slot(op_type, int(k))) static_slots_.insert(node_inputs[k]);
      }
      for (const std::string& out : node_outputs) producers[out] = {op_type, node_inputs};
    }
    // A value computed from other values (a window length cast, then less one) is static when
    // it feeds a static slot; Shape and Size read only their input's shape, so the walk stops
    // there. Bounded: each value is visited once.
    std::vector<std::string> pending(static_slots_.begin(), static_slots_.end());
    while (!pending.empty()) {
      std::string value = std::move(pending.back());
      pending.pop_back();
      auto it = producers.find(value);
      if (it == producers.end()) continue;
      const auto& [op_type, sources] = it->second;
      if (op_type == "Shape" || op_type == "Size") continue;
      for (const std::string& source : sources)
        if (!source.empty() && static_slots_.insert(source).second) pending.push_back(source);
    }
  }

  // The second pass: op counts, inputs and outputs, initializers.
  Status read_graph(WireReader graph) {
    while (graph.next()) {
      uint32_t n = graph.number();
      if (graph.wire_type() != kLengthDelimited) continue;
      if (n == field::kGraphNode) {
        KILN_RETURN_IF_ERROR(count_node(graph.nested()));
      } else if (n == field::kGraphInput || n == field::kGraphOutput) {
        KILN_ASSIGN_OR_RETURN(OnnxValueInfo info, read_value_info(graph.nested(), model_.name_));
        (n == field::kGraphInput ? graph_inputs_ : model_.outputs_).push_back(std::move(info));
      } else if (n == field::kGraphSparseInitializer) {
        return unimplemented(model_.name_ +
                             ": error: sparse initializers are not supported; store them dense");
      } else if (n == field::kGraphInitializer) {
        KILN_ASSIGN_OR_RETURN(Initializer initializer, read_initializer(graph.nested()));
        KILN_RETURN_IF_ERROR(bind_or_fold(std::move(initializer)));
      }
    }
    if (!graph.ok()) return malformed(model_.name_, "bad graph");
    return Status();
  }

  Status count_node(WireReader node) {
    std::string op_type, domain;
    while (node.next()) {
      if (node.wire_type() != kLengthDelimited) continue;
      if (node.number() == field::kNodeOpType) op_type = std::string(node.payload());
      if (node.number() == field::kNodeDomain) domain = std::string(node.payload());
    }
    if (!node.ok()) return malformed(model_.name_, "bad node");
    if (domain == "ai.onnx") domain = "";
    model_.op_counts_[domain.empty() ? op_type : domain + "." + op_type]++;
    return Status();
  }

  Result<Initializer> read_initializer(WireReader tensor) {
    Initializer out;
    OnnxModel::WeightPayload& payload = out.payload;
    while (tensor.next()) {
      uint32_t t = tensor.number();
      if (is_payload_field(t))
        out.payload_ranges.push_back({tensor.field_begin(), tensor.field_end()});
      if (t == field::kTensorDims) {
        if (!tensor.append_int64s(&out.weight.dims)) break;
      } else if (t == field::kTensorDataType && tensor.wire_type() == kVarint) {
        out.weight.element_type = static_cast<int32_t>(tensor.value());
      } else if (t == field::kTensorName && tensor.wire_type() == kLengthDelimited) {
        out.weight.name = std::string(tensor.payload());
      } else if ((t == field::kTensorRawData || t == field::kTensorFloatData ||
                  t == field::kTensorDoubleData) &&
                 tensor.wire_type() == kLengthDelimited) {
        payload.offset = tensor.payload_begin();
        payload.size = tensor.payload().size();
      } else if ((t == field::kTensorFloatData || t == field::kTensorDoubleData) &&
                 (tensor.wire_type() == kFixed32 || tensor.wire_type() == kFixed64)) {
        payload.packed = false;  // one element per field: rare, decoded on demand
      } else if (t == field::kTensorDataLocation && tensor.wire_type() == kVarint) {
        out.external = tensor.value() == 1;
      } else if (t == field::kTensorExternalData && tensor.wire_type() == kLengthDelimited) {
        read_external_entry(tensor.nested(), payload);
      }
    }
    if (!tensor.ok()) return malformed(model_.name_, "bad initializer '" + out.weight.name + "'");
    return out;
  }

  static void read_external_entry(WireReader entry, OnnxModel::WeightPayload& payload) {
    std::string key, value;
    while (entry.next()) {
      if (entry.wire_type() != kLengthDelimited) continue;
      if (entry.number() == field::kEntryKey) key = std::string(entry.payload());
      if (entry.number() == field::kEntryValue) value = std::string(entry.payload());
    }
    if (key == "location") payload.external_location = value;
    if (key == "offset") payload.external_offset = std::atoll(value.c_str());
    if (key == "length") payload.external_length = std::atoll(value.c_str());
  }

  // A bound weight becomes an argument of the code (its values left out of the digest); any
  // other initializer is folded into the code (its values, external ones included, in the key).
  Status bind_or_fold(Initializer initializer) {
    OnnxWeight& weight = initializer.weight;
    OnnxModel::WeightPayload& payload = initializer.payload;
    initializer_names_.insert(weight.name);
    int64_t count = 1;
    for (int64_t d : weight.dims) {
      if (d < 0 || (d > 0 && count > (int64_t(1) << 50) / d))
        return malformed(model_.name_, "initializer '" + weight.name + "' has bad dimensions");
      count *= d;
    }
    if (initializer.external && !safe_relative_path(payload.external_location))
      return invalid_argument(model_.name_ + ": error: initializer '" + weight.name +
                              "' names external data '" + payload.external_location +
                              "' outside the model's directory");
    bool read_at_import = read_at_import_.count(weight.name) > 0;
    if (fold_ || !onnx_initializer_is_bound(weight.element_type, count, read_at_import)) {
      if (initializer.external) folded_external_.push_back(payload);
      return Status();
    }
    if (!payload.packed)
      return unimplemented(model_.name_ + ": error: initializer '" + weight.name +
                           "' stores its values unpacked; re-save the model");
    if (!initializer.external) payload.external_location.clear();
    excluded_.insert(excluded_.end(), initializer.payload_ranges.begin(),
                     initializer.payload_ranges.end());
    model_.weights_.push_back(std::move(weight));
    model_.payloads_.push_back(std::move(payload));
    return Status();
  }

  // The graph's inputs that are not initializers, each marked static when it feeds a static slot.
  void keep_real_inputs() {
    for (OnnxValueInfo& input : graph_inputs_) {
      if (initializer_names_.count(input.name) > 0) continue;
      input.is_static = static_slots_.count(input.name) > 0;
      model_.inputs_.push_back(std::move(input));
    }
  }

  Result<std::string> structure_digest(std::string_view all) {
    Sha256 digest;
    digest.update_framed("onnx-structure-v1");
    size_t at = 0;
    for (auto [begin, end] : excluded_) {
      digest.update_framed(all.substr(at, begin - at));
      digest.update_framed("<bound weight values>");
      at = end;
    }
    digest.update_framed(all.substr(at));
    for (const OnnxModel::WeightPayload& payload : folded_external_) {
      std::string path = model_.directory_ + "/" + payload.external_location;
      auto data = read_file(path);
      if (!data.ok())
        return not_found(model_.name_ + ": error: the external data file '" + path +
                         "' cannot be read; keep it next to the model");
      size_t offset = size_t(std::max<int64_t>(payload.external_offset, 0));
      size_t length =
          payload.external_length < 0 ? std::string::npos : size_t(payload.external_length);
      digest.update_framed(payload.external_location);
      digest.update_framed(offset < data->size() ? std::string_view(*data).substr(offset, length)
                                                 : std::string_view());
    }
    return digest.hex();
  }

  OnnxModel& model_;
  bool fold_;
  // Byte ranges of bound weights' values: left out of the structure digest.
  std::vector<std::pair<size_t, size_t>> excluded_;
  std::vector<OnnxModel::WeightPayload> folded_external_;  // external data of folded initializers
  std::vector<OnnxValueInfo> graph_inputs_;
  std::set<std::string> static_slots_;    // graph values read to build the program
  std::set<std::string> read_at_import_;  // initializers the importer reads: they stay folded
  std::set<std::string> initializer_names_;
};

Result<OnnxModel> OnnxModel::parse(FileBytes bytes, std::string name, std::string directory,
                                   bool fold_weights) {
  OnnxModel model;
  model.name_ = std::move(name);
  model.directory_ = std::move(directory);
  model.bytes_ = std::move(bytes);
  KILN_RETURN_IF_ERROR(OnnxModelParser(model, fold_weights).parse());
  return model;
}

Result<Buffer> OnnxModel::read_weight(size_t index) const {
  const OnnxWeight& weight = weights_.at(index);
  const WeightPayload& payload = payloads_.at(index);
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_of_onnx(weight.element_type));
  KILN_ASSIGN_OR_RETURN(Buffer buffer, Buffer::allocate(dtype, weight.dims));
  size_t want = buffer.byte_size();
  if (!payload.external_location.empty()) {
    std::string path = directory_ + "/" + payload.external_location;
    std::ifstream file(path, std::ios::binary);
    if (!file)
      return not_found(name_ + ": error: the external data file '" + path + "' of initializer '" +
                       weight.name + "' cannot be opened; keep it next to the model");
    size_t length = payload.external_length < 0 ? want : size_t(payload.external_length);
    if (length != want)
      return invalid_argument(name_ + ": error: initializer '" + weight.name + "' has " +
                              std::to_string(length) + " bytes of external data, needs " +
                              std::to_string(want));
    file.seekg(payload.external_offset);
    file.read(static_cast<char*>(buffer.data()), std::streamsize(want));
    if (size_t(file.gcount()) != want)
      return invalid_argument(name_ + ": error: the external data file '" + path +
                              "' is too short for initializer '" + weight.name + "'");
    return buffer;
  }
  if (payload.size != want)
    return invalid_argument(name_ + ": error: initializer '" + weight.name + "' holds " +
                            std::to_string(payload.size) + " bytes, its type and shape need " +
                            std::to_string(want) + "; the model is damaged");
  if (want) std::memcpy(buffer.data(), bytes_.data.get() + payload.offset, want);
  return buffer;
}

namespace {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += char(v);
}

int32_t onnx_type_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return int32_t(OnnxElementType::kFloat);
    case DType::kF64:
      return int32_t(OnnxElementType::kDouble);
    case DType::kI1:
      return int32_t(OnnxElementType::kBool);
    case DType::kI8:
      return int32_t(OnnxElementType::kInt8);
    case DType::kI16:
      return int32_t(OnnxElementType::kInt16);
    case DType::kI32:
      return int32_t(OnnxElementType::kInt32);
    case DType::kI64:
      return int32_t(OnnxElementType::kInt64);
  }
  return 0;
}

}  // namespace

std::string encode_onnx_tensor(const Buffer& buffer, const std::string& name) {
  std::string out;
  for (int64_t d : buffer.shape()) {
    put_varint(out, field::kTensorDims << 3 | kVarint);
    put_varint(out, uint64_t(d));
  }
  put_varint(out, field::kTensorDataType << 3 | kVarint);
  put_varint(out, uint64_t(onnx_type_of(buffer.dtype())));
  put_varint(out, field::kTensorName << 3 | kLengthDelimited);
  put_varint(out, name.size());
  out += name;
  put_varint(out, field::kTensorRawData << 3 | kLengthDelimited);
  put_varint(out, buffer.byte_size());
  out.append(static_cast<const char*>(buffer.data()), buffer.byte_size());
  return out;
}

namespace {

// A TensorProto's fields as stored: its values are in `raw`, or in `ints` / `floats` (the
// repeated fields, widened).
struct TensorFields {
  std::vector<int64_t> dims;
  int32_t element_type = 0;
  std::string_view raw;
  bool have_raw = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

template <typename T>
void append_packed(std::string_view payload, std::vector<double>& out) {
  for (size_t k = 0; k + sizeof(T) <= payload.size(); k += sizeof(T)) {
    T v;
    std::memcpy(&v, payload.data() + k, sizeof(T));
    out.push_back(v);
  }
}

Result<TensorFields> read_tensor_fields(std::string_view bytes, const std::string& name) {
  TensorFields f;
  WireReader tensor(bytes);
  while (tensor.next()) {
    uint32_t t = tensor.number();
    int w = tensor.wire_type();
    if (t == field::kTensorDims) {
      if (!tensor.append_int64s(&f.dims)) break;
    } else if (t == field::kTensorDataType && w == kVarint) {
      f.element_type = static_cast<int32_t>(tensor.value());
    } else if (t == field::kTensorRawData && w == kLengthDelimited) {
      f.raw = tensor.payload();
      f.have_raw = true;
    } else if ((t == field::kTensorInt32Data || t == field::kTensorInt64Data) &&
               (w == kVarint || w == kLengthDelimited)) {
      if (!tensor.append_int64s(&f.ints)) break;
    } else if (t == field::kTensorFloatData && w == kLengthDelimited) {
      append_packed<float>(tensor.payload(), f.floats);
    } else if (t == field::kTensorDoubleData && w == kLengthDelimited) {
      append_packed<double>(tensor.payload(), f.floats);
    } else if (t == field::kTensorDataLocation && w == kVarint && tensor.value() == 1) {
      return unimplemented(name + ": error: a tensor with external data cannot be read here");
    }
  }
  if (!tensor.ok()) return malformed(name, "bad TensorProto framing");
  for (int64_t d : f.dims)
    if (d < 0) return malformed(name, "negative dimension");
  return f;
}

// The repeated field's values into `buffer`, converted to its element type.
void store_repeated_values(const TensorFields& f, Buffer& buffer) {
  int64_t n = buffer.element_count();
  for (int64_t k = 0; k < n; ++k) {
    switch (buffer.dtype()) {
      case DType::kF32:
        buffer.as<float>()[k] = float(f.floats[k]);
        break;
      case DType::kF64:
        buffer.as<double>()[k] = f.floats[k];
        break;
      case DType::kI1:
        buffer.as<uint8_t>()[k] = f.ints[k] != 0;
        break;
      case DType::kI8:
        buffer.as<int8_t>()[k] = int8_t(f.ints[k]);
        break;
      case DType::kI16:
        buffer.as<int16_t>()[k] = int16_t(f.ints[k]);
        break;
      case DType::kI32:
        buffer.as<int32_t>()[k] = int32_t(f.ints[k]);
        break;
      case DType::kI64:
        buffer.as<int64_t>()[k] = f.ints[k];
        break;
    }
  }
}

}  // namespace

Result<Buffer> decode_onnx_tensor(std::string_view bytes, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(TensorFields f, read_tensor_fields(bytes, name));
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_of_onnx(f.element_type));
  // The values must be in the bytes read: check the count before allocating for it.
  KILN_ASSIGN_OR_RETURN(size_t want, dense_byte_size(dtype, f.dims));
  bool floating = dtype == DType::kF32 || dtype == DType::kF64;
  size_t n_values =
      f.have_raw ? f.raw.size() / dtype_size(dtype) : (floating ? f.floats.size() : f.ints.size());
  if (want / dtype_size(dtype) != n_values)
    return malformed(name, "it holds " + std::to_string(n_values) + " values, its shape needs " +
                               std::to_string(want / dtype_size(dtype)));
  KILN_ASSIGN_OR_RETURN(Buffer buffer, Buffer::allocate(dtype, f.dims));
  if (f.have_raw) {
    if (f.raw.size() != want)
      return malformed(name, "raw_data holds " + std::to_string(f.raw.size()) +
                                 " bytes, the shape needs " + std::to_string(want));
    if (want) std::memcpy(buffer.data(), f.raw.data(), want);
    return buffer;
  }
  int64_t n = buffer.element_count();
  if (n_values != size_t(n))
    return malformed(name,
                     std::to_string(n_values) + " values for " + std::to_string(n) + " elements");
  store_repeated_values(f, buffer);
  return buffer;
}

Result<Buffer> read_onnx_tensor_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  return decode_onnx_tensor(bytes, path);
}

Result<std::vector<std::vector<int64_t>>> OnnxModel::resolve_input_shapes(
    const std::vector<std::vector<int64_t>>& given) const {
  if (!given.empty() && given.size() != inputs_.size())
    return invalid_argument(name_ + ": the model has " + std::to_string(inputs_.size()) +
                            " inputs, " + std::to_string(given.size()) + " were given");
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const OnnxValueInfo& input = inputs_[i];
    if (!input.has_shape && given.empty())
      return invalid_argument(name_ + ": input '" + input.name +
                              "' has no shape in the model; pass it with --input");
    if (given.empty()) {
      std::vector<int64_t> shape = input.dims;
      for (int64_t& d : shape)
        if (d == kDynamicDim) d = 1;
      shapes.push_back(shape);
      continue;
    }
    const std::vector<int64_t>& g = given[i];
    if (input.has_shape) {
      if (g.size() != input.dims.size())
        return invalid_argument(name_ + ": input '" + input.name + "' has rank " +
                                std::to_string(input.dims.size()) + ", the value given has rank " +
                                std::to_string(g.size()) + " (shape " + shape_to_string(g) + ")");
      for (size_t d = 0; d < g.size(); ++d) {
        if (input.dims[d] != kDynamicDim && input.dims[d] != g[d])
          return invalid_argument(name_ + ": input '" + input.name + "' dimension " +
                                  std::to_string(d) + " is " + std::to_string(input.dims[d]) +
                                  ", the value given has " + std::to_string(g[d]));
      }
    }
    shapes.push_back(g);
  }
  return shapes;
}

}  // namespace kiln

// ONNX ModelProto → MLIR text in the dialects kiln compiles (linalg, tensor, arith, math). Shapes
// are static: the caller fixes every input's shape, and the importer propagates shapes itself, so
// every tensor type is known and shape arithmetic (Shape → Gather → Concat → Reshape chains) folds
// to constants here. Bound weights (chosen by OnnxModel) become function arguments and their
// values are never read; everything else an op needs at import time must be a constant.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "kiln/onnx.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx_import/onnx_import_interface.h"

namespace kiln::onnx_import {
namespace {

using Shape = std::vector<int64_t>;

int64_t product(const Shape& shape, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, shape.size()); ++i) n *= shape[i];
  return n;
}

bool is_float_type(const std::string& elem) { return elem[0] == 'f'; }

std::string tensor_type(const std::string& elem, const Shape& shape) {
  std::string out = "tensor<";
  for (int64_t d : shape) out += std::to_string(d) + "x";
  return out + elem + ">";
}

// A value of the graph: an SSA tensor in the function, a host constant, or both.
struct Value {
  std::string ssa;   // "" for a constant not yet materialised
  std::string elem;  // "f32", "f64", "i64", "i32", "i16", "i8", "i1"
  Shape shape;
  bool is_const = false;
  std::vector<double> f;   // floating constants, row-major
  std::vector<int64_t> i;  // integer and bool constants, row-major
  int64_t count() const { return product(shape); }
  std::string type() const { return tensor_type(elem, shape); }
  double as_double(int64_t k) const { return is_float_type(elem) ? f[k] : double(i[k]); }
  int64_t as_int(int64_t k) const { return is_float_type(elem) ? int64_t(f[k]) : i[k]; }
};

struct ImportError {
  std::string message;
};
[[noreturn]] void fail(const std::string& message) { throw ImportError{message}; }

Result<std::string> elem_of_onnx(int32_t type) {
  switch (static_cast<OnnxElementType>(type)) {
    case OnnxElementType::kFloat:
      return std::string("f32");
    case OnnxElementType::kDouble:
      return std::string("f64");
    case OnnxElementType::kInt64:
      return std::string("i64");
    case OnnxElementType::kInt32:
      return std::string("i32");
    case OnnxElementType::kInt16:
      return std::string("i16");
    case OnnxElementType::kInt8:
      return std::string("i8");
    case OnnxElementType::kBool:
      return std::string("i1");
    default:
      return unimplemented("element type " + onnx_element_type_name(type) + " is not supported");
  }
}

std::string elem_or_fail(int32_t type, const std::string& where) {
  auto e = elem_of_onnx(type);
  if (!e.ok()) fail(where + ": " + e.status().message());
  return *e;
}

int bit_width(const std::string& elem) { return std::stoi(elem.substr(1)); }

// Exact MLIR spelling of a scalar constant of `elem`.
std::string scalar_literal(const std::string& elem, double value) {
  char buf[64];
  if (elem == "f32") {
    float v = float(value);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    std::snprintf(buf, sizeof buf, "0x%08" PRIX32, bits);
    return buf;
  }
  if (elem == "f64") {
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    std::snprintf(buf, sizeof buf, "0x%016" PRIX64, bits);
    return buf;
  }
  if (elem == "i1") return value != 0 ? "1" : "0";  // `true : i1` is not MLIR
  return std::to_string(int64_t(value));
}

// The bytes of a tensor stored outside the model (ONNX external data), from a file in the
// model's directory only.
std::string external_data(const onnx::TensorProto& t, const std::string& where,
                          const std::string& directory) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    if (e.key() == "offset") offset = std::atoll(e.value().c_str());
    if (e.key() == "length") length = std::atoll(e.value().c_str());
  }
  if (directory.empty() || location.empty() || location[0] == '/' ||
      location.find("..") != std::string::npos)
    fail(where + ": external data '" + location + "' is outside the model's directory");
  std::ifstream file(directory + "/" + location, std::ios::binary);
  if (!file) fail(where + ": cannot open its external data file '" + location + "'");
  file.seekg(offset);
  std::string bytes;
  if (length < 0) {
    bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  } else {
    bytes.resize(size_t(length));
    file.read(bytes.data(), length);
    if (file.gcount() != length) fail(where + ": its external data file is too short");
  }
  return bytes;
}

// Element `k` of little-endian raw data whose elements are `T`.
template <typename T>
T raw_element(const std::string& raw, int64_t k) {
  T x;
  std::memcpy(&x, raw.data() + sizeof(T) * size_t(k), sizeof(T));
  return x;
}

// A tensor's values: from `raw` when it has raw data (checked against the shape), else from the
// typed fields.
struct TensorData {
  const onnx::TensorProto& proto;
  const std::string& raw;
  bool has_raw;
  int64_t count;
  const std::string& where;

  void check_raw_size(size_t width) const {
    if (has_raw && raw.size() != size_t(count) * width)
      fail(where + ": raw_data holds " + std::to_string(raw.size()) + " bytes, the shape needs " +
           std::to_string(size_t(count) * width));
  }

  std::vector<double> floats(bool f32) const {
    check_raw_size(f32 ? 4 : 8);
    int typed = f32 ? proto.float_data_size() : proto.double_data_size();
    if (!has_raw && typed != count)
      fail(where + ": wrong number of " + std::string(f32 ? "float" : "double") + " values");
    std::vector<double> out(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) {
      if (f32)
        out[k] = has_raw ? raw_element<float>(raw, k) : proto.float_data(int(k));
      else
        out[k] = has_raw ? raw_element<double>(raw, k) : proto.double_data(int(k));
    }
    return out;
  }

  // `bits`: the element's width in raw data (booleans: a byte each).
  std::vector<int64_t> integers(int bits, bool int64_field) const {
    check_raw_size(size_t(bits / 8));
    if (!has_raw && (int64_field ? proto.int64_data_size() : proto.int32_data_size()) != count)
      fail(where + ": wrong number of " + std::string(int64_field ? "int64" : "integer") +
           " values");
    std::vector<int64_t> out(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) {
      if (!has_raw)
        out[k] = int64_field ? proto.int64_data(int(k)) : proto.int32_data(int(k));
      else if (bits == 64)
        out[k] = raw_element<int64_t>(raw, k);
      else if (bits == 32)
        out[k] = raw_element<int32_t>(raw, k);
      else if (bits == 16)
        out[k] = raw_element<int16_t>(raw, k);
      else
        out[k] = raw_element<int8_t>(raw, k);
    }
    return out;
  }
};

// Reads a TensorProto's values (raw_data, external data or the typed fields) as host data.
Value tensor_value(const onnx::TensorProto& t, const std::string& where,
                   const std::string& directory = "") {
  Value v;
  v.is_const = true;
  v.elem = elem_or_fail(t.data_type(), where);
  for (int64_t d : t.dims()) v.shape.push_back(d);
  std::string external;
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    external = external_data(t, where, directory);
  const std::string& raw = external.empty() ? t.raw_data() : external;
  TensorData data{t, raw, t.has_raw_data() || !external.empty(), product(v.shape), where};
  if (is_float_type(v.elem)) {
    v.f = data.floats(v.elem == "f32");
    return v;
  }
  bool boolean = v.elem == "i1";
  v.i = data.integers(boolean ? 8 : bit_width(v.elem), v.elem == "i64");
  if (boolean)
    for (int64_t& x : v.i) x = x != 0;
  return v;
}

Shape broadcast_shapes(const std::vector<Shape>& shapes, const std::string& where) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& o = out[rank - s.size() + k];
      int64_t d = s[k];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string text;
      for (const Shape& t : shapes) text += (text.empty() ? "" : " and ") + shape_to_string(t);
      fail(where + ": shapes " + text + " do not broadcast");
    }
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const std::string& where) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    fail(where + ": axis " + std::to_string(axis) + " is out of range for rank " +
         std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

class Importer {
 public:
  Importer(const onnx::ModelProto& model, const ImportRequest& request)
      : model_(model), request_(request) {
    for (const auto& opset : model.opset_import())
      if (opset.domain().empty() || opset.domain() == "ai.onnx") opset_ = opset.version();
  }

  std::string unsupported_nodes() {
    try {
      check_supported(model_.graph());
    } catch (const ImportError& e) {
      return e.message;
    }
    return "";
  }

  std::string run() {
    const onnx::GraphProto& graph = model_.graph();
    check_supported(graph);
    std::set<std::string> initializer_names;
    for (const auto& init : graph.initializer()) initializer_names.insert(init.name());
    std::vector<std::string> arguments;
    size_t input_index = 0;
    for (const auto& input : graph.input()) {
      if (initializer_names.count(input.name())) continue;
      if (input_index >= request_.input_shapes.size()) fail("more graph inputs than shapes given");
      Value v;
      v.elem = elem_or_fail(input.type().tensor_type().elem_type(), "input '" + input.name() + "'");
      v.shape = request_.input_shapes[input_index];
      const Buffer* fixed = input_index < request_.static_values.size()
                                ? request_.static_values[input_index]
                                : nullptr;
      if (fixed != nullptr) {  // a static input: its values are compiled in
        v = constant_of_buffer(*fixed, v.elem, "input '" + input.name() + "'");
      } else {
        v.ssa = "%arg" + std::to_string(arguments.size());
        arguments.push_back(v.ssa + ": " + v.type());
      }
      values_[input.name()] = v;
      ++input_index;
    }
    std::set<std::string> bound(request_.bound_weights.begin(), request_.bound_weights.end());
    size_t bound_seen = 0;
    for (const auto& init : graph.initializer()) {
      Shape shape(init.dims().begin(), init.dims().end());
      std::string where = "initializer '" + init.name() + "'";
      if (bound.count(init.name())) {
        if (bound_seen >= request_.bound_weights.size() ||
            request_.bound_weights[bound_seen++] != init.name())
          fail("the bound weights are not in initializer order");
        Value v;
        v.elem = elem_or_fail(init.data_type(), where);
        v.shape = shape;
        v.ssa = "%arg" + std::to_string(arguments.size());
        weight_argument_index_.push_back(arguments.size());
        arguments.push_back(v.ssa + ": " + v.type());
        weight_arguments_.push_back(arguments.back());
        weight_elems_.push_back(v.elem);
        bound_weight_ssa_.insert(v.ssa);
        values_[init.name()] = v;
      } else {
        values_[init.name()] = tensor_value(init, where, request_.model_directory);
      }
    }
    for (const auto& node : graph.node()) {
      for (const std::string& in : node.input()) consumers_.emplace(in, &node);
      for (const std::string& out : node.output()) producer_[out] = &node;
    }
    for (const auto& output : graph.output()) graph_outputs_.insert(output.name());
    for (const auto& node : graph.node()) {
      node_ = &node;
      where_ = "node '" + (node.name().empty() ? node.op_type() : node.name()) + "' (" +
               node.op_type() + ")";
      std::vector<Value> outs = lower(node);
      for (int k = 0; k < node.output_size() && k < int(outs.size()); ++k)
        if (!node.output(k).empty()) values_[node.output(k)] = std::move(outs[k]);
    }
    std::vector<std::string> results, result_types;
    for (const auto& output : graph.output()) {
      auto it = values_.find(output.name());
      if (it == values_.end()) fail("graph output '" + output.name() + "' is never computed");
      Value& v = it->second;
      results.push_back(ssa(v));
      result_types.push_back(v.type());
    }
    std::string module_name = "onnx";
    for (char c : graph.name()) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') module_name += c;
      if (module_name.size() > 48) break;
    }
    if (module_name != "onnx") module_name.insert(4, "_");
    // A weight main does not read (only kiln_prepare does, or nothing) keeps its place in main's
    // signature with no elements: the program need not keep it once the prepared copy exists.
    std::string body = body_.str();
    for (size_t k = 0; k < weight_arguments_.size(); ++k) {
      std::string name = "%arg" + std::to_string(weight_argument_index_[k]);
      bool returned = std::find(results.begin(), results.end(), name) != results.end();
      if (!returned && !mentions(body, name))
        arguments[weight_argument_index_[k]] = name + ": tensor<0x" + weight_elems_[k] + ">";
    }
    for (const Value& p : prepared_) arguments.push_back(p.ssa + ": " + p.type());
    std::ostringstream out;
    out << "module @" << module_name << " {\n  func.func @main(";
    for (size_t k = 0; k < arguments.size(); ++k) out << (k ? ", " : "") << arguments[k];
    out << ") -> (";
    for (size_t k = 0; k < result_types.size(); ++k) out << (k ? ", " : "") << result_types[k];
    out << ") {\n" << body << "    return ";
    for (size_t k = 0; k < results.size(); ++k) out << (k ? ", " : "") << results[k];
    out << " : ";
    for (size_t k = 0; k < result_types.size(); ++k) out << (k ? ", " : "") << result_types[k];
    out << "\n  }\n";
    if (!prepared_.empty()) {
      // Run once when the program is loaded, on the bound weights (all of them, in order): its
      // results are main's last arguments.
      out << "  func.func @" << kPrepareEntry << "(";
      for (size_t k = 0; k < weight_arguments_.size(); ++k)
        out << (k ? ", " : "") << weight_arguments_[k];
      out << ") -> (";
      for (size_t k = 0; k < prepared_.size(); ++k) out << (k ? ", " : "") << prepared_[k].type();
      out << ") {\n" << prepare_body_.str() << "    return ";
      for (size_t k = 0; k < prepared_.size(); ++k) out << (k ? ", " : "") << prepared_results_[k];
      out << " : ";
      for (size_t k = 0; k < prepared_.size(); ++k) out << (k ? ", " : "") << prepared_[k].type();
      out << "\n  }\n";
    }
    out << "}\n";
    return out.str();
  }

 private:
  // Whether `text` uses the SSA value `name` (not merely one whose name starts with it).
  static bool mentions(const std::string& text, const std::string& name) {
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
      size_t end = at + name.size();
      if (end == text.size()) return true;
      char next = text[end];
      if (!std::isalnum(static_cast<unsigned char>(next)) && next != '_' && next != '.' &&
          next != '$' && next != '-')
        return true;
    }
    return false;
  }

  static Value constant_of_buffer(const Buffer& b, const std::string& elem,
                                  const std::string& where) {
    Value v;
    v.is_const = true;
    v.elem = elem;
    v.shape = b.shape();
    for (int64_t k = 0; k < b.element_count(); ++k) {
      switch (b.dtype()) {
        case DType::kF32:
          v.f.push_back(b.as<float>()[k]);
          break;
        case DType::kF64:
          v.f.push_back(b.as<double>()[k]);
          break;
        case DType::kI64:
          v.i.push_back(b.as<int64_t>()[k]);
          break;
        case DType::kI32:
          v.i.push_back(b.as<int32_t>()[k]);
          break;
        case DType::kI16:
          v.i.push_back(b.as<int16_t>()[k]);
          break;
        case DType::kI8:
          v.i.push_back(b.as<int8_t>()[k]);
          break;
        case DType::kI1:
          v.i.push_back(b.as<uint8_t>()[k] != 0);
          break;
        default:
          fail(where + ": element type " + dtype_name(b.dtype()) + " cannot be compiled in");
      }
    }
    return v;
  }

  // ---- support checks --------------------------------------------------------------------------
  static const std::set<std::string>& supported_ops() {
    static const std::set<std::string> ops = {"Abs",
                                              "Acos",
                                              "Acosh",
                                              "Add",
                                              "And",
                                              "ArgMax",
                                              "ArgMin",
                                              "Asin",
                                              "Asinh",
                                              "Atan",
                                              "Atanh",
                                              "AveragePool",
                                              "BatchNormalization",
                                              "Cast",
                                              "CastLike",
                                              "Ceil",
                                              "Celu",
                                              "Clip",
                                              "Concat",
                                              "Constant",
                                              "ConstantOfShape",
                                              "Conv",
                                              "Cos",
                                              "Cosh",
                                              "Div",
                                              "Dropout",
                                              "Elu",
                                              "Equal",
                                              "Erf",
                                              "Exp",
                                              "Expand",
                                              "Flatten",
                                              "Floor",
                                              "Gather",
                                              "Gemm",
                                              "GlobalAveragePool",
                                              "GlobalMaxPool",
                                              "Greater",
                                              "GreaterOrEqual",
                                              "HardSigmoid",
                                              "HardSwish",
                                              "Identity",
                                              "LayerNormalization",
                                              "LeakyRelu",
                                              "Less",
                                              "LessOrEqual",
                                              "Log",
                                              "LogSoftmax",
                                              "MatMul",
                                              "Max",
                                              "MaxPool",
                                              "Mean",
                                              "Min",
                                              "Mish",
                                              "Mul",
                                              "Neg",
                                              "Not",
                                              "Or",
                                              "Pad",
                                              "Pow",
                                              "PRelu",
                                              "Range",
                                              "Reciprocal",
                                              "ReduceL1",
                                              "ReduceL2",
                                              "ReduceLogSum",
                                              "ReduceLogSumExp",
                                              "ReduceMax",
                                              "ReduceMean",
                                              "ReduceMin",
                                              "ReduceProd",
                                              "ReduceSum",
                                              "ReduceSumSquare",
                                              "Relu",
                                              "Reshape",
                                              "Round",
                                              "Selu",
                                              "Shape",
                                              "Sigmoid",
                                              "Sign",
                                              "Sin",
                                              "Sinh",
                                              "Size",
                                              "Slice",
                                              "Softmax",
                                              "Softplus",
                                              "Softsign",
                                              "Split",
                                              "Sqrt",
                                              "Squeeze",
                                              "Sub",
                                              "Sum",
                                              "Tan",
                                              "Tanh",
                                              "ThresholdedRelu",
                                              "Tile",
                                              "Transpose",
                                              "Unsqueeze",
                                              "Where",
                                              "Xor",
                                              "Shrink",
                                              "Trilu",
                                              "Einsum",
                                              "GatherElements",
                                              "NegativeLogLikelihoodLoss",
                                              "SoftmaxCrossEntropyLoss",
                                              "Mod",
                                              "IsInf",
                                              "IsNaN",
                                              "Hardmax",
                                              "ConvTranspose",
                                              "Resize",
                                              "Upsample",
                                              "LSTM",
                                              "GRU",
                                              "RNN",
                                              "DepthToSpace",
                                              "SpaceToDepth",
                                              "EyeLike",
                                              "InstanceNormalization",
                                              "OneHot",
                                              "HannWindow",
                                              "HammingWindow",
                                              "BlackmanWindow"};
    return ops;
  }

  void check_supported(const onnx::GraphProto& graph) {
    std::string problems;
    int count = 0;
    if (opset_ < 1 || opset_ > 17)
      fail("default-domain opset " + std::to_string(opset_) + " is not supported (1 to 17 are)");
    // Below opset 6 a node is accepted only where its operator's definition is the one opset 6
    // has (ONNX's schema registry tells), since the lowering follows opset 6 and later.
    if (opset_ < 6) {
      std::string changed;
      for (const auto& node : graph.node()) {
        const auto* old_schema = onnx::OpSchemaRegistry::Schema(node.op_type(), int(opset_), "");
        const auto* new_schema = onnx::OpSchemaRegistry::Schema(node.op_type(), 6, "");
        if (old_schema && new_schema && old_schema->since_version() == new_schema->since_version())
          continue;
        changed += (changed.empty() ? "" : ", ") + node.op_type();
      }
      if (!changed.empty())
        fail("default-domain opset " + std::to_string(opset_) + " defines " + changed +
             " differently from opset 6, the oldest kiln reads; re-export at opset 13 or later");
    }
    for (const auto& node : graph.node()) {
      std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
      bool ok =
          domain.empty() && supported_ops().count(node.op_type()) && node.op_type() != "Einsum";
      if (ok) continue;
      ++count;
      problems += "\n  " + node.op_type() + " (node '" + node.name() + "', domain '" +
                  (domain.empty() ? "ai.onnx" : domain) + "', opset " + std::to_string(opset_) +
                  ")";
    }
    if (count)
      fail(std::to_string(count) + " node(s) use operators kiln does not support:" + problems +
           "\nsee docs/ONNX.md for the supported operators");
  }

  // ---- attributes and inputs -------------------------------------------------------------------
  const onnx::AttributeProto* attr(const std::string& name) const {
    for (const auto& a : node_->attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t attr_int(const std::string& name, int64_t fallback) const {
    const auto* a = attr(name);
    return a ? a->i() : fallback;
  }
  double attr_float(const std::string& name, double fallback) const {
    const auto* a = attr(name);
    return a ? a->f() : fallback;
  }
  std::string attr_string(const std::string& name, const std::string& fallback) const {
    const auto* a = attr(name);
    return a ? a->s() : fallback;
  }
  std::optional<std::vector<int64_t>> attr_ints(const std::string& name) const {
    const auto* a = attr(name);
    if (!a) return std::nullopt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }

  bool has_input(int k) const { return k < node_->input_size() && !node_->input(k).empty(); }
  Value& input(int k) {
    if (!has_input(k)) fail(where_ + ": input " + std::to_string(k) + " is missing");
    auto it = values_.find(node_->input(k));
    if (it == values_.end())
      fail(where_ + ": input '" + node_->input(k) + "' is not defined before this node");
    return it->second;
  }
  // An input whose values the importer needs (shapes, axes, pads): must be constant.
  const Value& const_input(int k, const std::string& what) {
    Value& v = input(k);
    if (!v.is_const)
      fail(where_ + ": its " + what + " (input '" + node_->input(k) +
           "') must be a constant for kiln; it is computed at run time");
    return v;
  }
  std::vector<int64_t> const_ints(int k, const std::string& what) {
    const Value& v = const_input(k, what);
    std::vector<int64_t> out;
    for (int64_t j = 0; j < v.count(); ++j) out.push_back(v.as_int(j));
    return out;
  }

  // ---- emission helpers ------------------------------------------------------------------------
  std::string fresh() { return "%v" + std::to_string(next_id_++); }
  void line(const std::string& text) { body_ << "    " << text << "\n"; }

  std::string ssa(Value& v) {
    if (!v.ssa.empty()) return v.ssa;
    v.ssa = fresh();
    line(v.ssa + " = arith.constant " + dense_literal(v) + " : " + v.type());
    return v.ssa;
  }

  static std::string dense_literal(const Value& v) {
    int64_t n = v.count();
    bool splat = n > 0;
    for (int64_t k = 1; k < n && splat; ++k)
      splat = v.as_double(k) == v.as_double(0) && (is_float_type(v.elem) || v.i[k] == v.i[0]);
    if (n == 0) return "dense<>";
    if (splat || n == 1) {
      std::string s = is_float_type(v.elem)
                          ? scalar_literal(v.elem, v.f[0])
                          : (v.elem == "i1" ? (v.i[0] ? "true" : "false") : std::to_string(v.i[0]));
      return "dense<" + s + ">";
    }
    if (v.elem == "i1") {
      std::string s = "dense<[";
      for (int64_t k = 0; k < n; ++k) s += std::string(k ? ", " : "") + (v.i[k] ? "true" : "false");
      return s + "]>";
    }
    // Little-endian raw bytes: exact and compact.
    std::string hex = "dense<\"0x";
    static const char* digits = "0123456789ABCDEF";
    auto put = [&](const void* p, size_t size) {
      const auto* b = static_cast<const uint8_t*>(p);
      for (size_t j = 0; j < size; ++j) {
        hex += digits[b[j] >> 4];
        hex += digits[b[j] & 15];
      }
    };
    for (int64_t k = 0; k < n; ++k) {
      if (v.elem == "f32") {
        float x = float(v.f[k]);
        put(&x, 4);
      } else if (v.elem == "f64") {
        double x = v.f[k];
        put(&x, 8);
      } else if (v.elem == "i64") {
        int64_t x = v.i[k];
        put(&x, 8);
      } else if (v.elem == "i32") {
        int32_t x = int32_t(v.i[k]);
        put(&x, 4);
      } else if (v.elem == "i16") {
        int16_t x = int16_t(v.i[k]);
        put(&x, 2);
      } else {
        int8_t x = int8_t(v.i[k]);
        put(&x, 1);
      }
    }
    return hex + "\">";
  }

  std::string constant_scalar(const std::string& elem, double value) {
    std::string name = fresh();
    line(name + " = arith.constant " + scalar_literal(elem, value) + " : " + elem);
    return name;
  }

  std::string empty(const std::string& elem, const Shape& shape) {
    std::string name = fresh();
    line(name + " = tensor.empty() : " + tensor_type(elem, shape));
    return name;
  }

  std::string filled(const std::string& elem, const Shape& shape, double value) {
    std::string e = empty(elem, shape);
    std::string c = constant_scalar(elem, value);
    std::string name = fresh();
    line(name + " = linalg.fill ins(" + c + " : " + elem + ") outs(" + e + " : " +
         tensor_type(elem, shape) + ") -> " + tensor_type(elem, shape));
    return name;
  }

  static std::string dims_list(size_t rank) {
    std::string s;
    for (size_t k = 0; k < rank; ++k) s += (k ? ", " : "") + std::string("d") + std::to_string(k);
    return s;
  }
  static std::string iterators(const std::vector<bool>& reduction) {
    std::string s = "[";
    for (size_t k = 0; k < reduction.size(); ++k)
      s += std::string(k ? ", " : "") + (reduction[k] ? "\"reduction\"" : "\"parallel\"");
    return s + "]";
  }
  // The map of an operand broadcast (numpy-style, right-aligned) into `out_shape`.
  static std::string broadcast_map(const Shape& in, const Shape& out) {
    std::string s = "affine_map<(" + dims_list(out.size()) + ") -> (";
    size_t offset = out.size() - in.size();
    for (size_t k = 0; k < in.size(); ++k) {
      s += k ? ", " : "";
      s += (in[k] == 1 && out[offset + k] != 1) ? "0" : "d" + std::to_string(offset + k);
    }
    return s + ")>";
  }

  // A body builder: gets the block argument names of the inputs and returns the yielded value.
  using Body = std::function<std::string(const std::vector<std::string>&)>;

  // out = f(inputs...) elementwise with numpy broadcasting into `out_shape`.
  Value elementwise(std::vector<Value*> ins, const std::string& out_elem, const Shape& out_shape,
                    const Body& body) {
    if (std::optional<Value> nhwc = elementwise_channels_last(ins, out_elem, out_shape, body))
      return *nhwc;
    if (std::optional<Value> planar = elementwise_on_planes(ins, out_elem, out_shape, body))
      return *planar;
    std::vector<std::string> maps;
    for (Value* v : ins) maps.push_back(broadcast_map(v->shape, out_shape));
    return elementwise_at(ins, maps, out_elem, out_shape, body);
  }

  // An all-parallel kernel computing `out_shape` from `ins`, each read at its map in `maps`.
  Value elementwise_at(std::vector<Value*> ins, std::vector<std::string> maps,
                       const std::string& out_elem, const Shape& out_shape, const Body& body) {
    std::vector<std::string> names, types, block_args;
    for (Value* v : ins) {
      names.push_back(ssa(*v));
      types.push_back(v->type());
    }
    maps.push_back(broadcast_map(out_shape, out_shape));
    std::string init = empty(out_elem, out_shape);
    Value out;
    out.elem = out_elem;
    out.shape = out_shape;
    out.ssa = fresh();
    std::string head = out.ssa + " = linalg.generic {indexing_maps = [";
    for (size_t k = 0; k < maps.size(); ++k) head += (k ? ", " : "") + maps[k];
    head += "], iterator_types = " + iterators(std::vector<bool>(out_shape.size(), false)) + "}";
    if (!ins.empty()) {
      head += " ins(";
      for (size_t k = 0; k < names.size(); ++k) head += (k ? ", " : "") + names[k];
      head += " : ";
      for (size_t k = 0; k < types.size(); ++k) head += (k ? ", " : "") + types[k];
      head += ")";
    }
    head += " outs(" + init + " : " + out.type() + ") {";
    line(head);
    std::string args = "^bb0(";
    for (size_t k = 0; k < ins.size(); ++k) {
      std::string a = "%b" + std::to_string(next_id_++);
      block_args.push_back(a);
      args += a + ": " + ins[k]->elem + ", ";
    }
    args += "%b" + std::to_string(next_id_++) + ": " + out_elem + "):";
    line(args);
    std::string result = body(block_args);
    line("  linalg.yield " + result + " : " + out_elem);
    line("} -> " + out.type());
    return out;
  }

  // An elementwise kernel on feature maps that are transposes of channels-last values
  // (channels_last_of_: a transposed product's output, a channels-last depthwise convolution's),
  // computed channels-last and transposed back after. The transposes back are dead code wherever
  // the next layer takes the channels-last value again (another such kernel, the padding and
  // taps of a channels-last depthwise convolution, a transposed product's rows). nullopt unless
  // every full-size input has such a value and the rest broadcast per channel or are scalars.
  std::optional<Value> elementwise_channels_last(const std::vector<Value*>& ins,
                                                 const std::string& out_elem,
                                                 const Shape& out_shape, const Body& body) {
    if (out_shape.size() != 4 || out_shape[0] != 1) return std::nullopt;
    // A concatenation takes NCHW: there the kernel reading its input transposed (the transpose
    // fused into it) is one pass, channels-last then a transpose two.
    if (output_reaches([](const onnx::NodeProto& n) { return n.op_type() == "Concat"; }))
      return std::nullopt;
    int64_t channels = out_shape[1];
    Shape nhwc = {1, out_shape[2], out_shape[3], channels};
    // As rows of pixels, (H*W, C), where a transposed product's epilogue can then read the product
    // itself; not where the result is padded next (see gets_padded).
    bool as_rows = !output_gets_padded();
    Shape rows = {out_shape[2] * out_shape[3], channels};
    std::optional<std::vector<Value>> last =
        relaid_inputs(ins, out_shape, channels_last_of_, as_rows ? rows : nhwc, {channels});
    if (!last) return std::nullopt;
    Value y = elementwise(pointers(*last), out_elem, as_rows ? rows : nhwc, body);
    Value y4 = reshape(y, nhwc);
    return transpose(y4, {0, 3, 1, 2});
  }

  // An elementwise kernel on feature maps that are reshaped products (plane_of_), computed on
  // the products' (C, H*W) layout and reshaped after: the bias, activation and residual add
  // after a convolution then read the product directly, with no reshape between, so the compiler
  // can compute them on each tile of the product while it is still in cache. nullopt unless
  // every full-size input is such a product and the rest broadcast per channel or are scalars.
  std::optional<Value> elementwise_on_planes(const std::vector<Value*>& ins,
                                             const std::string& out_elem, const Shape& out_shape,
                                             const Body& body) {
    if (out_shape.size() != 4 || out_shape[0] != 1 || output_gets_padded()) return std::nullopt;
    int64_t channels = out_shape[1];
    Shape plane = {channels, out_shape[2] * out_shape[3]};
    std::optional<std::vector<Value>> planar =
        relaid_inputs(ins, out_shape, plane_of_, plane, {channels, 1});
    if (!planar) return std::nullopt;
    Value y = elementwise(pointers(*planar), out_elem, plane, body);
    return reshape(y, out_shape);
  }

  // The inputs of an elementwise kernel on (1, C, H, W) feature maps, in another layout: each
  // full-size input is the value `layouts` holds for it (reshaped to `full`), each per-channel
  // one is reshaped to `per_channel`, each scalar to rank 0. nullopt when a full-size input has
  // no such value, another input does not broadcast per channel, or no input is full-size.
  std::optional<std::vector<Value>> relaid_inputs(const std::vector<Value*>& ins,
                                                  const Shape& out_shape,
                                                  const std::map<std::string, Value>& layouts,
                                                  const Shape& full, const Shape& per_channel) {
    int64_t channels = out_shape[1];
    std::vector<Value> out;
    out.reserve(ins.size());
    bool any = false;
    for (Value* v : ins) {
      if (v->shape == out_shape) {
        auto known = v->is_const ? layouts.end() : layouts.find(v->ssa);
        if (known == layouts.end()) return std::nullopt;
        Value relaid = known->second;
        out.push_back(reshape(relaid, full));
        any = true;
      } else if (v->count() == 1) {
        out.push_back(reshape(*v, {}));
      } else if (v->count() == channels && v->shape.size() >= 3 &&
                 v->shape[v->shape.size() - 3] == channels) {
        out.push_back(reshape(*v, per_channel));
      } else {
        return std::nullopt;
      }
    }
    if (!any) return std::nullopt;
    return out;
  }

  static std::vector<Value*> pointers(std::vector<Value>& values) {
    std::vector<Value*> out;
    for (Value& v : values) out.push_back(&v);
    return out;
  }

  // Whether the current node's result reaches a padding consumer, or one `wanted` holds.
  bool output_gets_padded() const {
    return node_ != nullptr && node_->output_size() > 0 && gets_padded(node_->output(0));
  }
  bool output_reaches(const std::function<bool(const onnx::NodeProto&)>& wanted) const {
    return node_ != nullptr && node_->output_size() > 0 && reaches(node_->output(0), wanted);
  }

  // Whether the value named `name` reaches, through elementwise nodes only, a node that places
  // its input inside a bigger buffer (a convolution or pool with pads, Pad, Concat). That buffer
  // is filled by a copy of a value computed in a product's layout, while a feature map computed in
  // its own layout is written into it directly: there the product's layout costs a pass more than
  // it saves (squeezenet's concatenated expand convolutions, mobilenet's padded depthwise ones).
  bool gets_padded(const std::string& name) const {
    return reaches(name, [](const onnx::NodeProto& consumer) {
      const std::string& type = consumer.op_type();
      if (type == "Pad" || type == "Concat") return true;
      if (type != "Conv" && type != "MaxPool" && type != "AveragePool" && type != "LpPool")
        return false;
      for (const auto& a : consumer.attribute()) {
        if (a.name() == "pads")
          for (int64_t p : a.ints())
            if (p != 0) return true;
        if (a.name() == "auto_pad" && a.s().rfind("SAME", 0) == 0) return true;
        if (a.name() == "ceil_mode" && a.i() != 0) return true;  // may pad the end
      }
      return false;
    });
  }

  // Whether the value named `name` reaches, through elementwise nodes only, a node `wanted` holds.
  bool reaches(const std::string& name, const std::function<bool(const onnx::NodeProto&)>& wanted,
               int depth = 0) const {
    static const std::set<std::string> elementwise = {
        "Relu", "Clip",  "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh",
        "Add",  "Sub",   "Mul",     "Div",         "Neg",       "Exp",       "Elu",
        "Selu", "PRelu", "Mish",    "Softplus",    "Identity",  "Dropout"};
    if (depth > 16) return false;
    auto [first, last] = consumers_.equal_range(name);
    for (auto it = first; it != last; ++it) {
      const onnx::NodeProto& consumer = *it->second;
      if (wanted(consumer)) return true;
      if (elementwise.count(consumer.op_type()))
        for (const std::string& out : consumer.output())
          if (!out.empty() && reaches(out, wanted, depth + 1)) return true;
    }
    return false;
  }

  // One scalar operation inside a body.
  std::string op(const std::string& name, const std::vector<std::string>& operands,
                 const std::string& type, const std::string& extra = "") {
    std::string r = fresh();
    std::string s = "  " + r + " = " + name + " " + extra;
    for (size_t k = 0; k < operands.size(); ++k) s += (k ? ", " : "") + operands[k];
    line(s + " : " + type);
    return r;
  }
  // One step of a sum. Float sums may be reassociated: ONNX fixes no summation order, and LLVM
  // vectorises a reduction loop only when it may reorder the additions (a global average pool
  // 2.3x faster over 56-long rows, 14x once kiln makes its rows one loop).
  std::string sum_step(const std::string& a, const std::string& v, const std::string& elem) {
    if (!is_float_type(elem)) return op("arith.addi", {a, v}, elem);
    std::string r = fresh();
    line("  " + r + " = arith.addf " + a + ", " + v + " fastmath<reassoc> : " + elem);
    return r;
  }
  std::string cmp(const std::string& elem, const std::string& fpred, const std::string& ipred,
                  const std::string& a, const std::string& b) {
    std::string r = fresh();
    if (is_float_type(elem))
      line("  " + r + " = arith.cmpf " + fpred + ", " + a + ", " + b + " : " + elem);
    else
      line("  " + r + " = arith.cmpi " + ipred + ", " + a + ", " + b + " : " + elem);
    return r;
  }
  std::string select(const std::string& c, const std::string& a, const std::string& b,
                     const std::string& elem) {
    std::string r = fresh();
    line("  " + r + " = arith.select " + c + ", " + a + ", " + b + " : " + elem);
    return r;
  }
  std::string k_in_body(const std::string& elem, double value) {
    std::string r = fresh();
    line("  " + r + " = arith.constant " + scalar_literal(elem, value) + " : " + elem);
    return r;
  }
  std::string index_of(int dim) {
    std::string r = fresh();
    line("  " + r + " = linalg.index " + std::to_string(dim) + " : index");
    return r;
  }

  Value reshape(Value&& v, const Shape& shape) { return reshape(v, shape); }
  // Static reshape through a 1-D view (any shape to any shape with the same element count).
  Value reshape(Value& v, const Shape& shape) {
    if (product(shape) != v.count())
      fail(where_ + ": cannot reshape " + shape_to_string(v.shape) + " to " +
           shape_to_string(shape));
    if (v.is_const) {
      Value c = v;
      c.ssa.clear();
      c.shape = shape;
      return c;
    }
    if (v.shape == shape) return v;
    std::string current = ssa(v);
    Shape flat = {v.count()};
    std::string flat_ssa = current;
    if (v.shape.empty()) {  // rank 0 → 1-D is an expansion
      flat_ssa = fresh();
      line(flat_ssa + " = tensor.expand_shape " + current + " [] output_shape [1] : " + v.type() +
           " into " + tensor_type(v.elem, flat));
    } else if (v.shape.size() > 1) {
      flat_ssa = fresh();
      std::string group;
      for (size_t k = 0; k < v.shape.size(); ++k) group += (k ? ", " : "") + std::to_string(k);
      line(flat_ssa + " = tensor.collapse_shape " + current + " [[" + group + "]] : " + v.type() +
           " into " + tensor_type(v.elem, flat));
    }
    Value out;
    out.elem = v.elem;
    out.shape = shape;
    if (shape.size() == 1) {
      out.ssa = flat_ssa;
      return out;
    }
    out.ssa = fresh();
    if (shape.empty()) {
      line(out.ssa + " = tensor.collapse_shape " + flat_ssa + " [] : " + tensor_type(v.elem, flat) +
           " into " + out.type());
      return out;
    }
    std::string group, sizes;
    for (size_t k = 0; k < shape.size(); ++k) {
      group += (k ? ", " : "") + std::to_string(k);
      sizes += (k ? ", " : "") + std::to_string(shape[k]);
    }
    line(out.ssa + " = tensor.expand_shape " + flat_ssa + " [[" + group + "]] output_shape [" +
         sizes + "] : " + tensor_type(v.elem, flat) + " into " + out.type());
    if (v.shape.size() == 2 && shape.size() == 4 && shape[0] == 1 && shape[1] == v.shape[0])
      plane_of_[out.ssa] = v;
    return out;
  }

  // `v` (2-D) with its second dimension split into `parts`, or `v` with every dimension after the
  // first merged into one (`parts` empty): one reassociation group per side, so the view stays
  // valid on a strided buffer (a slice of wider rows), where reshape's 1-D view would not.
  Value regroup_columns(Value& v, const Shape& parts) {
    Value out;
    out.elem = v.elem;
    out.ssa = fresh();
    std::string group;
    size_t inner = parts.empty() ? v.shape.size() - 1 : parts.size();
    for (size_t k = 1; k <= inner; ++k) group += (k > 1 ? ", " : "") + std::to_string(k);
    if (parts.empty()) {
      out.shape = {v.shape[0], product(Shape(v.shape.begin() + 1, v.shape.end()))};
      line(out.ssa + " = tensor.collapse_shape " + ssa(v) + " [[0], [" + group +
           "]] : " + v.type() + " into " + out.type());
    } else {
      out.shape = {v.shape[0]};
      out.shape.insert(out.shape.end(), parts.begin(), parts.end());
      line(out.ssa + " = tensor.expand_shape " + ssa(v) + " [[0], [" + group + "]] output_shape [" +
           i64_list(out.shape) + "] : " + v.type() + " into " + out.type());
    }
    return out;
  }

  // The same transpose on fewer dimensions, when some are 1 or stay next to each other (NCHW to
  // NHWC of one image is (C, H*W) to (H*W, C)): long rows for the kernel, and a copy when nothing
  // really moves. Static shapes only; nullopt when nothing merges.
  std::optional<Value> transpose_merged(Value& v, const std::vector<int64_t>& perm,
                                        const Shape& out_shape) {
    for (int64_t d : v.shape)
      if (d < 0) return std::nullopt;
    // Output order of the input dimensions that are not 1.
    std::vector<int64_t> order;
    for (int64_t p : perm)
      if (v.shape[p] != 1) order.push_back(p);
    // Runs of input dimensions that stay adjacent and in order.
    std::vector<std::vector<int64_t>> runs;
    for (int64_t p : order) {
      if (!runs.empty()) {
        int64_t last = runs.back().back(), next = last + 1;
        while (next < int64_t(v.shape.size()) && v.shape[next] == 1) ++next;
        if (next == p) {
          runs.back().push_back(p);
          continue;
        }
      }
      runs.push_back({p});
    }
    if (runs.size() == perm.size()) return std::nullopt;  // nothing merged
    if (runs.size() <= 1) return reshape(v, out_shape);   // only the order of 1s changes
    // Collapsed input: the runs in input order; the collapsed permutation maps output runs to it.
    std::vector<size_t> by_input(runs.size());
    for (size_t r = 0; r < runs.size(); ++r) by_input[r] = r;
    std::sort(by_input.begin(), by_input.end(),
              [&](size_t a, size_t b) { return runs[a][0] < runs[b][0]; });
    Shape in_shape;
    for (size_t r : by_input) {
      int64_t size = 1;
      for (int64_t d : runs[r]) size *= v.shape[d];
      in_shape.push_back(size);
    }
    std::vector<int64_t> merged_perm(runs.size());
    for (size_t r = 0; r < runs.size(); ++r) {
      size_t position = std::find(by_input.begin(), by_input.end(), r) - by_input.begin();
      merged_perm[r] = int64_t(position);
    }
    Value collapsed = reshape(v, in_shape);
    Value moved = transpose(collapsed, merged_perm);
    return reshape(moved, out_shape);
  }

  static bool to_channels_last(const std::vector<int64_t>& perm) {
    return perm == std::vector<int64_t>{0, 2, 3, 1};
  }
  static bool to_channels_first(const std::vector<int64_t>& perm) {
    return perm == std::vector<int64_t>{0, 3, 1, 2};
  }

  // Transposes between NCHW and NHWC are remembered (channels_last_of_): asked again, or asked to
  // undo one, the value at hand is returned instead of a copy of a copy.
  Value transpose(Value& v, const std::vector<int64_t>& perm) {
    // Feature maps only: a bound weight's re-layout belongs to the prepare function.
    bool tracked =
        !v.is_const && v.shape.size() == 4 && !v.ssa.empty() && bound_weight_ssa_.count(v.ssa) == 0;
    if (tracked && to_channels_last(perm)) {
      auto known = channels_last_of_.find(v.ssa);
      if (known != channels_last_of_.end()) return known->second;
    }
    Value out = transpose_copy(v, perm);
    if (tracked && !out.is_const && !out.ssa.empty()) {
      if (to_channels_last(perm)) channels_last_of_[v.ssa] = out;
      if (to_channels_first(perm)) channels_last_of_[out.ssa] = v;
    }
    return out;
  }

  Value transpose_copy(Value& v, const std::vector<int64_t>& perm) {
    Shape shape;
    for (int64_t p : perm) shape.push_back(v.shape[p]);
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k) identity &= perm[k] == int64_t(k);
    if (identity) return v;
    if (v.is_const) {
      Value c;
      c.is_const = true;
      c.elem = v.elem;
      c.shape = shape;
      int64_t n = v.count();
      if (is_float_type(v.elem))
        c.f.resize(n);
      else
        c.i.resize(n);
      for (int64_t out = 0; out < n; ++out) {
        int64_t rem = out, src = 0;
        std::vector<int64_t> idx(shape.size());
        for (int64_t k = int64_t(shape.size()) - 1; k >= 0; --k) {
          idx[k] = rem % shape[k];
          rem /= shape[k];
        }
        std::vector<int64_t> src_idx(shape.size());
        for (size_t k = 0; k < perm.size(); ++k) src_idx[perm[k]] = idx[k];
        for (size_t k = 0; k < shape.size(); ++k) src = src * v.shape[k] + src_idx[k];
        if (is_float_type(v.elem))
          c.f[out] = v.f[src];
        else
          c.i[out] = v.i[src];
      }
      return c;
    }
    if (std::optional<Value> merged = transpose_merged(v, perm, shape)) return *merged;
    std::string init = empty(v.elem, shape);
    Value out;
    out.elem = v.elem;
    out.shape = shape;
    out.ssa = fresh();
    std::string p;
    for (size_t k = 0; k < perm.size(); ++k) p += (k ? ", " : "") + std::to_string(perm[k]);
    line(out.ssa + " = linalg.transpose ins(" + ssa(v) + " : " + v.type() + ") outs(" + init +
         " : " + out.type() + ") permutation = [" + p + "]");
    return out;
  }

  // Reduces `v` over `axes` (sorted, unique). `init`, `combine(acc, x)` define the reduction;
  // `pre(x)` maps each element first. Keeps the reduced dimensions as 1 when `keepdims`.
  Value reduce(Value& v, std::vector<int64_t> axes, bool keepdims, const std::string& out_elem,
               double init, const std::function<std::string(const std::string&)>& pre,
               const std::function<std::string(const std::string&, const std::string&)>& combine) {
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    std::vector<bool> reduced(v.shape.size(), false);
    for (int64_t a : axes) reduced[a] = true;
    Shape out_shape, kept_shape;
    std::string out_map = "affine_map<(" + dims_list(v.shape.size()) + ") -> (";
    bool first = true;
    for (size_t k = 0; k < v.shape.size(); ++k) {
      kept_shape.push_back(reduced[k] ? 1 : v.shape[k]);
      if (reduced[k]) continue;
      out_shape.push_back(v.shape[k]);
      out_map += (first ? "" : ", ") + std::string("d") + std::to_string(k);
      first = false;
    }
    out_map += ")>";
    std::string acc = filled(out_elem, out_shape, init);
    Value out;
    out.elem = out_elem;
    out.shape = out_shape;
    out.ssa = fresh();
    line(out.ssa + " = linalg.generic {indexing_maps = [" + broadcast_map(v.shape, v.shape) + ", " +
         out_map + "], iterator_types = " + iterators(reduced) + "} ins(" + ssa(v) + " : " +
         v.type() + ") outs(" + acc + " : " + out.type() + ") {");
    std::string x = "%b" + std::to_string(next_id_++), a = "%b" + std::to_string(next_id_++);
    line("^bb0(" + x + ": " + v.elem + ", " + a + ": " + out_elem + "):");
    std::string r = combine(a, pre(x));
    line("  linalg.yield " + r + " : " + out_elem);
    line("} -> " + out.type());
    if (keepdims) return reshape(out, kept_shape);
    return out;
  }

  Value slice(Value& v, const Shape& offsets, const Shape& sizes, const Shape& strides) {
    if (product(sizes) == 0 && !v.is_const) {  // empty: MLIR rejects an offset at the end
      Value out;
      out.elem = v.elem;
      out.shape = sizes;
      out.ssa = empty(v.elem, sizes);
      return out;
    }
    if (v.is_const) {
      Value c;
      c.is_const = true;
      c.elem = v.elem;
      c.shape = sizes;
      int64_t n = product(sizes);
      for (int64_t out = 0; out < n; ++out) {
        int64_t rem = out, src = 0;
        std::vector<int64_t> idx(sizes.size());
        for (int64_t k = int64_t(sizes.size()) - 1; k >= 0; --k) {
          idx[k] = rem % sizes[k];
          rem /= sizes[k];
        }
        for (size_t k = 0; k < sizes.size(); ++k)
          src = src * v.shape[k] + offsets[k] + idx[k] * strides[k];
        if (is_float_type(v.elem))
          c.f.push_back(v.f[src]);
        else
          c.i.push_back(v.i[src]);
      }
      return c;
    }
    auto list = [](const Shape& s) {
      std::string out;
      for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
      return out;
    };
    Value out;
    out.elem = v.elem;
    out.shape = sizes;
    out.ssa = fresh();
    line(out.ssa + " = tensor.extract_slice " + ssa(v) + "[" + list(offsets) + "] [" + list(sizes) +
         "] [" + list(strides) + "] : " + v.type() + " to " + out.type());
    return out;
  }

  Value concat(std::vector<Value*> parts, int64_t axis) {
    Shape shape = parts[0]->shape;
    shape[axis] = 0;
    bool all_const = true;
    for (Value* p : parts) {
      shape[axis] += p->shape[axis];
      all_const &= p->is_const;
      if (p->elem != parts[0]->elem) fail(where_ + ": inputs of different element types");
    }
    if (all_const) {
      Value c;
      c.is_const = true;
      c.elem = parts[0]->elem;
      c.shape = shape;
      int64_t outer = product(shape, 0, axis);
      for (int64_t o = 0; o < outer; ++o)
        for (Value* p : parts) {
          int64_t inner = product(p->shape, axis);
          for (int64_t j = 0; j < inner; ++j) {
            int64_t src = o * inner + j;
            if (is_float_type(c.elem))
              c.f.push_back(p->f[src]);
            else
              c.i.push_back(p->i[src]);
          }
        }
      return c;
    }
    std::string acc = empty(parts[0]->elem, shape);
    std::string type = tensor_type(parts[0]->elem, shape);
    int64_t offset = 0;
    for (Value* p : parts) {
      if (p->count() == 0) continue;
      std::string offsets, sizes, strides;
      for (size_t k = 0; k < shape.size(); ++k) {
        offsets += (k ? ", " : "") + std::to_string(int64_t(k) == axis ? offset : 0);
        sizes += (k ? ", " : "") + std::to_string(p->shape[k]);
        strides += k ? ", 1" : "1";
      }
      std::string next = fresh();
      line(next + " = tensor.insert_slice " + ssa(*p) + " into " + acc + "[" + offsets + "] [" +
           sizes + "] [" + strides + "] : " + p->type() + " into " + type);
      acc = next;
      offset += p->shape[axis];
    }
    Value out;
    out.elem = parts[0]->elem;
    out.shape = shape;
    out.ssa = acc;
    return out;
  }

  // The channels-last value a (N, C, H, W) feature map is the transpose of, if there is one.
  std::optional<Value> channels_last(const Value& v) const {
    if (v.shape.size() != 4 || v.is_const) return std::nullopt;
    auto known = channels_last_of_.find(v.ssa);
    if (known == channels_last_of_.end()) return std::nullopt;
    return known->second;
  }

  // Pads with `value` (constant mode). Low/high per dimension, non-negative.
  Value pad(Value& v, const Shape& low, const Shape& high, double value) {
    bool none = true;
    for (size_t k = 0; k < low.size(); ++k) none &= low[k] == 0 && high[k] == 0;
    if (none) return v;
    // Spatial padding of a feature map that is the transpose of a channels-last value: padded
    // channels-last (what a channels-last convolution reads next), transposed back after.
    if (low[0] == 0 && high[0] == 0 && low[1] == 0 && high[1] == 0) {
      if (std::optional<Value> last = channels_last(v)) {
        Value padded = pad(*last, {0, low[2], low[3], 0}, {0, high[2], high[3], 0}, value);
        return transpose(padded, {0, 3, 1, 2});
      }
    }
    Shape shape = v.shape;
    std::string l, h, idx;
    for (size_t k = 0; k < shape.size(); ++k) {
      shape[k] += low[k] + high[k];
      l += (k ? ", " : "") + std::to_string(low[k]);
      h += (k ? ", " : "") + std::to_string(high[k]);
      idx += (k ? ", " : "") + std::string("%i") + std::to_string(next_id_) + "_" +
             std::to_string(k) + ": index";
    }
    ++next_id_;
    Value out;
    out.elem = v.elem;
    out.shape = shape;
    bool growing_static =
        std::all_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d >= 0; });
    for (size_t k = 0; k < low.size(); ++k) growing_static &= low[k] >= 0 && high[k] >= 0;
    if (growing_static) {
      // The padding value written on the border only, the input inserted in the middle:
      // bufferisation lets the input's producer write straight into the padded buffer (no copy),
      // and no pass over the whole buffer fills what the input then overwrites.
      out.ssa = empty(v.elem, shape);
      size_t rank = shape.size();
      // Each border cell belongs to the first dimension where it lies outside the input: the
      // dimensions before that one span the input, the ones after it the whole padded extent.
      for (size_t k = 0; k < rank; ++k) {
        for (bool high_side : {false, true}) {
          int64_t width = high_side ? high[k] : low[k];
          if (width == 0) continue;
          Shape offsets(rank, 0), sizes(rank);
          for (size_t j = 0; j < rank; ++j) {
            offsets[j] = j < k ? low[j] : 0;
            sizes[j] = j < k ? v.shape[j] : shape[j];
          }
          offsets[k] = high_side ? low[k] + v.shape[k] : 0;
          sizes[k] = width;
          fill_region(out, offsets, sizes, value);
        }
      }
      insert_region(out, v, low);
      return out;
    }
    std::string c = constant_scalar(v.elem, value);
    out.ssa = fresh();
    line(out.ssa + " = tensor.pad " + ssa(v) + " low[" + l + "] high[" + h + "] {");
    line("^bb0(" + idx + "):");
    line("  tensor.yield " + c + " : " + v.elem);
    line("} : " + v.type() + " to " + out.type());
    return out;
  }

  // Copies `v` broadcast into `shape` (Expand, batch dimensions of MatMul).
  Value broadcast_to(Value& v, const Shape& shape) {
    if (v.shape == shape) return v;
    return elementwise({&v}, v.elem, shape, [](const std::vector<std::string>& a) { return a[0]; });
  }

  Value make_const_ints(const Shape& shape, std::vector<int64_t> values,
                        const std::string& elem = "i64") {
    Value c;
    c.is_const = true;
    c.elem = elem;
    c.shape = shape;
    c.i = std::move(values);
    return c;
  }
  Value make_const_floats(const std::string& elem, const Shape& shape, std::vector<double> values) {
    Value c;
    c.is_const = true;
    c.elem = elem;
    c.shape = shape;
    c.f = std::move(values);
    return c;
  }

  // ---- operators -------------------------------------------------------------------------------
  std::vector<Value> lower(const onnx::NodeProto& node) {
    const std::string& t = node.op_type();
    if (t == "Constant") return {constant_node()};
    if (t == "Identity") return {input(0)};
    if (t == "Dropout") return dropout();
    if (t == "GatherElements") return {gather_elements()};
    if (t == "NegativeLogLikelihoodLoss") {
      Value log_prob = input(0);
      return {nll_loss(log_prob)};
    }
    if (t == "SoftmaxCrossEntropyLoss") {
      Value log_prob = log_softmax_axis1(input(0));
      return {nll_loss(log_prob), log_prob};
    }
    if (t == "Mod") return {mod()};
    if (t == "IsInf" || t == "IsNaN") return {is_inf_nan(t == "IsNaN")};
    if (t == "Hardmax") return {hardmax()};
    if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Pow" || t == "Equal" ||
        t == "Less" || t == "Greater" || t == "LessOrEqual" || t == "GreaterOrEqual" ||
        t == "And" || t == "Or" || t == "Xor" || t == "PRelu")
      return {binary(t, input(0), legacy_broadcast(input(0), input(1)))};
    if (t == "Max" || t == "Min" || t == "Sum" || t == "Mean") return {variadic(t)};
    if (t == "Where") return {where()};
    if (t == "Cast" || t == "CastLike") return {cast()};
    if (t == "Clip") return {clip()};
    if (t == "Shape") return {shape_of()};
    if (t == "Size") return {make_const_ints({}, {input(0).count()})};
    if (t == "ConstantOfShape") return {constant_of_shape()};
    if (t == "Range") return {range()};
    if (t == "Reshape") return {reshape_node()};
    if (t == "Flatten") return {flatten()};
    if (t == "Squeeze" || t == "Unsqueeze") return {squeeze_unsqueeze(t == "Squeeze")};
    if (t == "Transpose") return {transpose_node()};
    if (t == "Concat") return {concat_node()};
    if (t == "Slice") return {slice_node()};
    if (t == "Split") return split_node();
    if (t == "Gather") return {gather()};
    if (t == "Expand") return {expand()};
    if (t == "Tile") return {tile()};
    if (t == "Pad") return {pad_node()};
    if (t == "MatMul") return {matmul(input(0), input(1))};
    if (t == "Gemm") return {gemm()};
    if (t == "Conv") return {conv()};
    if (t == "ConvTranspose") return {conv_transpose()};
    if (t == "Resize" || t == "Upsample") return {resize(t == "Upsample")};
    if (t == "LSTM" || t == "GRU" || t == "RNN") return recurrent(t);
    if (t == "DepthToSpace" || t == "SpaceToDepth") return {depth_space(t == "DepthToSpace")};
    if (t == "EyeLike") return {eye_like()};
    if (t == "InstanceNormalization") return {instance_norm()};
    if (t == "OneHot") return {one_hot()};
    if (t == "HannWindow" || t == "HammingWindow" || t == "BlackmanWindow") return {window_fn(t)};
    if (t == "MaxPool" || t == "AveragePool") return {pool(t == "MaxPool")};
    if (t == "GlobalAveragePool" || t == "GlobalMaxPool")
      return {global_pool(t == "GlobalMaxPool")};
    if (t == "BatchNormalization") return {batch_norm()};
    if (t == "LayerNormalization") return layer_norm();
    if (t == "Softmax" || t == "LogSoftmax") return {softmax(t == "LogSoftmax")};
    if (t.rfind("Reduce", 0) == 0) return {reduce_node(t)};
    if (t == "ArgMax" || t == "ArgMin") return {arg_reduce(t == "ArgMax")};
    if (t == "Trilu") return {trilu()};
    return {unary(t, input(0))};
  }

  Value constant_node() {
    const auto* a = node_->attribute_size() ? &node_->attribute(0) : nullptr;
    if (!a) fail(where_ + ": no value");
    const std::string& n = a->name();
    if (n == "value") return tensor_value(a->t(), where_);
    if (n == "value_float") return make_const_floats("f32", {}, {a->f()});
    if (n == "value_floats")
      return make_const_floats("f32", {a->floats_size()},
                               std::vector<double>(a->floats().begin(), a->floats().end()));
    if (n == "value_int") return make_const_ints({}, {a->i()});
    if (n == "value_ints")
      return make_const_ints({a->ints_size()},
                             std::vector<int64_t>(a->ints().begin(), a->ints().end()));
    fail(where_ + ": attribute '" + n + "' is not supported");
  }

  // Host evaluation of a scalar function on constants (shape arithmetic).
  static double fold_binary(const std::string& t, double a, double b, bool floating) {
    if (t == "Add") return a + b;
    if (t == "Sub") return a - b;
    if (t == "Mul") return a * b;
    if (t == "Div") {
      if (floating) return a / b;
      if (b == 0) return 0;
      return double(int64_t(a) / int64_t(b));
    }
    if (t == "Pow") return std::pow(a, b);
    if (t == "Equal") return a == b;
    if (t == "Less") return a < b;
    if (t == "Greater") return a > b;
    if (t == "LessOrEqual") return a <= b;
    if (t == "GreaterOrEqual") return a >= b;
    if (t == "And") return (a != 0) && (b != 0);
    if (t == "Or") return (a != 0) || (b != 0);
    if (t == "Xor") return (a != 0) != (b != 0);
    if (t == "Max") return std::max(a, b);
    if (t == "Min") return std::min(a, b);
    if (t == "PRelu") return a < 0 ? a * b : a;
    return 0;
  }

  static bool is_comparison(const std::string& t) {
    return t == "Equal" || t == "Less" || t == "Greater" || t == "LessOrEqual" ||
           t == "GreaterOrEqual";
  }

  Value binary(const std::string& t, Value a, Value b) {
    Shape shape = broadcast_shapes({a.shape, b.shape}, where_);
    bool logical = t == "And" || t == "Or" || t == "Xor";
    std::string out_elem = is_comparison(t) || logical ? "i1" : a.elem;
    if (t != "Pow" && a.elem != b.elem)
      fail(where_ + ": inputs have different element types (" + a.elem + ", " + b.elem + ")");
    const std::string elem = a.elem;
    bool floating = is_float_type(elem);
    if (a.is_const && b.is_const && product(shape) <= 4096) {
      Value c;
      c.is_const = true;
      c.elem = out_elem;
      c.shape = shape;
      int64_t n = product(shape);
      for (int64_t k = 0; k < n; ++k) {
        double x = a.as_double(broadcast_index(k, shape, a.shape));
        double y = b.as_double(broadcast_index(k, shape, b.shape));
        double r = fold_binary(t, x, y, floating);
        if (is_float_type(out_elem))
          c.f.push_back(elem == "f32" ? double(float(r)) : r);
        else
          c.i.push_back(int64_t(r));
      }
      return c;
    }
    return elementwise({&a, &b}, out_elem, shape, [&, t](const std::vector<std::string>& x) {
      return scalar_binary(t, elem, b.elem, x[0], x[1]);
    });
  }

  std::string scalar_binary(const std::string& t, const std::string& elem,
                            const std::string& elem_b, const std::string& x, const std::string& y) {
    bool f = is_float_type(elem);
    if (t == "Add") return op(f ? "arith.addf" : "arith.addi", {x, y}, elem);
    if (t == "Sub") return op(f ? "arith.subf" : "arith.subi", {x, y}, elem);
    if (t == "Mul") return op(f ? "arith.mulf" : "arith.muli", {x, y}, elem);
    if (t == "Div") return op(f ? "arith.divf" : "arith.divsi", {x, y}, elem);
    if (t == "Max") return op(f ? "arith.maximumf" : "arith.maxsi", {x, y}, elem);
    if (t == "Min") return op(f ? "arith.minimumf" : "arith.minsi", {x, y}, elem);
    if (t == "Pow") {
      if (!f) {  // integer base: through f64, exact for the results integers can hold
        std::string base = convert(x, elem, "f64");
        std::string exponent = convert(y, elem_b, "f64");
        return convert(op("math.powf", {base, exponent}, "f64"), "f64", elem);
      }
      std::string e = y;
      if (elem_b != elem) e = convert(y, elem_b, elem);
      return op("math.powf", {x, e}, elem);
    }
    if (t == "Equal") return cmp(elem, "oeq", "eq", x, y);
    if (t == "Less") return cmp(elem, "olt", "slt", x, y);
    if (t == "Greater") return cmp(elem, "ogt", "sgt", x, y);
    if (t == "LessOrEqual") return cmp(elem, "ole", "sle", x, y);
    if (t == "GreaterOrEqual") return cmp(elem, "oge", "sge", x, y);
    if (t == "And") return op("arith.andi", {x, y}, "i1");
    if (t == "Or") return op("arith.ori", {x, y}, "i1");
    if (t == "Xor") return op("arith.xori", {x, y}, "i1");
    if (t == "PRelu") {
      std::string zero = k_in_body(elem, 0);
      std::string neg = cmp(elem, "olt", "slt", x, zero);
      std::string scaled = op(f ? "arith.mulf" : "arith.muli", {x, y}, elem);
      return select(neg, scaled, x, elem);
    }
    fail(where_ + ": unsupported binary operator");
  }

  static int64_t broadcast_index(int64_t flat, const Shape& out, const Shape& in) {
    int64_t src = 0, stride = 1;
    size_t offset = out.size() - in.size();
    for (int64_t k = int64_t(out.size()) - 1; k >= 0; --k) {
      int64_t idx = flat % out[k];
      flat /= out[k];
      if (k >= int64_t(offset)) {
        int64_t d = in[k - offset];
        src += (d == 1 ? 0 : idx) * stride;
        stride *= d;
      }
    }
    return src;
  }

  // Before opset 7, a binary op broadcast its second operand only when asked (`broadcast`), from
  // dimension `axis` of the first: align it there for numpy-style broadcasting.
  Value legacy_broadcast(const Value& a, const Value& b) {
    // PRelu before opset 7: a 1-D slope of one value per channel applies along dimension 1.
    if (opset_ < 7 && node_->op_type() == "PRelu" && b.shape.size() == 1 && a.shape.size() > 2 &&
        b.shape[0] == a.shape[1] && b.shape[0] != 1) {
      Shape per_channel(a.shape.size() - 1, 1);
      per_channel[0] = b.shape[0];
      Value copy = b;
      return reshape(copy, per_channel);
    }
    if (opset_ >= 7 || !attr_int("broadcast", 0) || !attr("axis")) return b;
    int64_t axis = normalize_axis(attr_int("axis", 0), int64_t(a.shape.size()), where_);
    Shape shape = b.shape;
    while (int64_t(shape.size()) + axis < int64_t(a.shape.size())) shape.push_back(1);
    Value copy = b;
    return reshape(copy, shape);
  }

  Value variadic(const std::string& t) {
    Value acc = input(0);
    std::string op_name = t == "Sum" || t == "Mean" ? "Add" : t;
    for (int k = 1; k < node_->input_size(); ++k) acc = binary(op_name, acc, input(k));
    if (t == "Mean") {
      Value n = make_const_floats(acc.elem, {}, {double(node_->input_size())});
      acc = binary("Div", acc, n);
    }
    return acc;
  }

  Value where() {
    Value& c = input(0);
    Value& x = input(1);
    Value& y = input(2);
    Shape shape = broadcast_shapes({c.shape, x.shape, y.shape}, where_);
    if (c.is_const && x.is_const && y.is_const && product(shape) <= 4096) {
      Value r;
      r.is_const = true;
      r.elem = x.elem;
      r.shape = shape;
      for (int64_t k = 0; k < product(shape); ++k) {
        bool cond = c.i[broadcast_index(k, shape, c.shape)] != 0;
        Value& src = cond ? x : y;
        int64_t j = broadcast_index(k, shape, src.shape);
        if (is_float_type(r.elem))
          r.f.push_back(src.f[j]);
        else
          r.i.push_back(src.i[j]);
      }
      return r;
    }
    std::string elem = x.elem;
    return elementwise({&c, &x, &y}, elem, shape, [&, elem](const std::vector<std::string>& a) {
      return select(a[0], a[1], a[2], elem);
    });
  }

  std::string convert(const std::string& x, const std::string& from, const std::string& to) {
    if (from == to) return x;
    bool ff = is_float_type(from), ft = is_float_type(to);
    if (ff && ft)
      return op(bit_width(to) > bit_width(from) ? "arith.extf" : "arith.truncf", {x},
                from + " to " + to);
    if (to == "i1") {
      std::string zero = k_in_body(from, 0);
      return cmp(from, "une", "ne", x, zero);
    }
    if (from == "i1") return op(ft ? "arith.uitofp" : "arith.extui", {x}, "i1 to " + to);
    if (ff) return op("arith.fptosi", {x}, from + " to " + to);
    if (ft) return op("arith.sitofp", {x}, from + " to " + to);
    return op(bit_width(to) > bit_width(from) ? "arith.extsi" : "arith.trunci", {x},
              from + " to " + to);
  }

  Value cast() {
    Value& x = input(0);
    std::string to = node_->op_type() == "CastLike"
                         ? input(1).elem
                         : elem_or_fail(int32_t(attr_int("to", 1)), where_);
    if (x.is_const) {
      Value c;
      c.is_const = true;
      c.elem = to;
      c.shape = x.shape;
      for (int64_t k = 0; k < x.count(); ++k) {
        double v = x.as_double(k);
        if (is_float_type(to))
          c.f.push_back(to == "f32" ? double(float(v)) : v);
        else if (to == "i1")
          c.i.push_back(v != 0);
        else
          c.i.push_back(is_float_type(x.elem) ? int64_t(std::trunc(v)) : x.i[k]);
      }
      return c;
    }
    std::string from = x.elem;
    return elementwise({&x}, to, x.shape, [&, from, to](const std::vector<std::string>& a) {
      return convert(a[0], from, to);
    });
  }

  Value clip() {
    Value& x = input(0);
    std::optional<double> lo, hi;
    if (opset_ < 11) {
      if (attr("min")) lo = attr_float("min", 0);
      if (attr("max")) hi = attr_float("max", 0);
    } else {
      if (has_input(1)) lo = const_input(1, "min").as_double(0);
      if (has_input(2)) hi = const_input(2, "max").as_double(0);
    }
    std::string elem = x.elem;
    bool f = is_float_type(elem);
    return elementwise(
        {&x}, elem, x.shape, [&, lo, hi, elem, f](const std::vector<std::string>& a) {
          std::string v = a[0];
          if (lo) v = op(f ? "arith.maximumf" : "arith.maxsi", {v, k_in_body(elem, *lo)}, elem);
          if (hi) v = op(f ? "arith.minimumf" : "arith.minsi", {v, k_in_body(elem, *hi)}, elem);
          return v;
        });
  }

  // The host value of a unary op on a constant element (nullopt: not folded here). Shape
  // arithmetic (Neg of an axis, Abs of a step) must fold so later ops see constants.
  static std::optional<double> fold_unary(const std::string& t, double v, bool floating) {
    if (t == "Neg") return -v;
    if (t == "Abs") return std::fabs(v);
    if (t == "Relu") return v > 0 ? v : 0.0;
    if (t == "Sign") return double((v > 0) - (v < 0));
    if (t == "Not") return v == 0 ? 1.0 : 0.0;
    if (!floating) return std::nullopt;
    if (t == "Floor") return std::floor(v);
    if (t == "Ceil") return std::ceil(v);
    if (t == "Round") return std::nearbyint(v);
    if (t == "Sqrt") return std::sqrt(v);
    if (t == "Exp") return std::exp(v);
    if (t == "Log") return std::log(v);
    if (t == "Reciprocal") return 1.0 / v;
    return std::nullopt;
  }

  Value unary(const std::string& t, Value x) {
    std::string elem = x.elem;
    bool f = is_float_type(elem);
    if (x.is_const && x.count() <= 4096 && fold_unary(t, 0.0, f)) {
      Value c;
      c.is_const = true;
      c.elem = elem;
      c.shape = x.shape;
      for (int64_t k = 0; k < x.count(); ++k) {
        double r = *fold_unary(t, x.as_double(k), f);
        if (f)
          c.f.push_back(elem == "f32" ? double(float(r)) : r);
        else
          c.i.push_back(int64_t(r));
      }
      return c;
    }
    if (!f && t != "Abs" && t != "Neg" && t != "Not" && t != "Relu" && t != "Sign")
      fail(where_ + ": " + t + " of " + elem + " is not supported");
    double alpha = attr_float("alpha", 0), beta = attr_float("beta", 0);
    double gamma = attr_float("gamma", 0), lambd = attr_float("lambd", 0.5),
           bias = attr_float("bias", 0);
    return elementwise(
        {&x}, elem, x.shape,
        [&, t, elem, f, alpha, beta, gamma, lambd, bias](const std::vector<std::string>& a) {
          const std::string& v = a[0];
          auto k = [&](double c) { return k_in_body(elem, c); };
          auto mul = [&](const std::string& p, const std::string& q) {
            return op(f ? "arith.mulf" : "arith.muli", {p, q}, elem);
          };
          auto add = [&](const std::string& p, const std::string& q) {
            return op("arith.addf", {p, q}, elem);
          };
          auto math = [&](const std::string& name, const std::string& p) {
            return op("math." + name, {p}, elem);
          };
          if (t == "Relu") return op(f ? "arith.maximumf" : "arith.maxsi", {v, k(0)}, elem);
          if (t == "Neg")
            return f ? op("arith.negf", {v}, elem) : op("arith.subi", {k(0), v}, elem);
          if (t == "Abs") return f ? math("absf", v) : math("absi", v);
          if (t == "Not") return op("arith.xori", {v, k_in_body("i1", 1)}, "i1");
          if (t == "Exp") return math("exp", v);
          if (t == "Log") return math("log", v);
          if (t == "Sqrt") return math("sqrt", v);
          if (t == "Reciprocal") return op("arith.divf", {k(1), v}, elem);
          if (t == "Tanh") return math("tanh", v);
          if (t == "Erf") return math("erf", v);
          if (t == "Floor") return math("floor", v);
          if (t == "Ceil") return math("ceil", v);
          if (t == "Round") return math("roundeven", v);
          if (t == "Sin") return math("sin", v);
          if (t == "Cos") return math("cos", v);
          if (t == "Tan") return math("tan", v);
          if (t == "Asin") return math("asin", v);
          if (t == "Acos") return math("acos", v);
          if (t == "Atan") return math("atan", v);
          if (t == "Sinh") return math("sinh", v);
          if (t == "Cosh") return math("cosh", v);
          if (t == "Asinh") return math("asinh", v);
          if (t == "Acosh") return math("acosh", v);
          if (t == "Atanh") return math("atanh", v);
          if (t == "Sigmoid") {
            std::string e = math("exp", op("arith.negf", {v}, elem));
            return op("arith.divf", {k(1), add(k(1), e)}, elem);
          }
          if (t == "Softplus") return math("log1p", math("exp", v));
          if (t == "Softsign") return op("arith.divf", {v, add(k(1), math("absf", v))}, elem);
          if (t == "Sign") {
            std::string zero = k(0);
            std::string pos = cmp(elem, "ogt", "sgt", v, zero);
            std::string neg = cmp(elem, "olt", "slt", v, zero);
            return select(pos, k(1), select(neg, k(-1), zero, elem), elem);
          }
          if (t == "LeakyRelu") {
            double slope = attr("alpha") ? alpha : 0.01;
            std::string neg = cmp(elem, "olt", "slt", v, k(0));
            return select(neg, mul(v, k(slope)), v, elem);
          }
          if (t == "ThresholdedRelu") {
            double th = attr("alpha") ? alpha : 1.0;
            return select(cmp(elem, "ogt", "sgt", v, k(th)), v, k(0), elem);
          }
          if (t == "Elu" || t == "Celu") {
            double al = attr("alpha") ? alpha : 1.0;
            std::string neg = cmp(elem, "olt", "slt", v, k(0));
            std::string scaled = t == "Elu" ? v : op("arith.divf", {v, k(al)}, elem);
            std::string em1 = math("expm1", scaled);
            return select(neg, mul(em1, k(al)), v, elem);
          }
          if (t == "Selu") {
            double al = attr("alpha") ? alpha : 1.67326319217681884765625;
            double ga = attr("gamma") ? gamma : 1.05070102214813232421875;
            std::string neg = cmp(elem, "ole", "sle", v, k(0));
            std::string e = op("arith.subf", {mul(math("exp", v), k(al)), k(al)}, elem);
            return mul(select(neg, e, v, elem), k(ga));
          }
          if (t == "HardSigmoid") {
            double al = attr("alpha") ? alpha : 0.2, be = attr("beta") ? beta : 0.5;
            std::string y = add(mul(v, k(al)), k(be));
            return op("arith.minimumf", {op("arith.maximumf", {y, k(0)}, elem), k(1)}, elem);
          }
          if (t == "HardSwish") {
            std::string y = add(mul(v, k(1.0 / 6)), k(0.5));
            y = op("arith.minimumf", {op("arith.maximumf", {y, k(0)}, elem), k(1)}, elem);
            return mul(v, y);
          }
          if (t == "Mish") return mul(v, math("tanh", math("log1p", math("exp", v))));
          if (t == "Shrink") {
            std::string lo = cmp(elem, "olt", "slt", v, k(-lambd));
            std::string hi = cmp(elem, "ogt", "sgt", v, k(lambd));
            return select(lo, add(v, k(bias)),
                          select(hi, op("arith.subf", {v, k(bias)}, elem), k(0), elem), elem);
          }
          fail(where_ + ": unsupported operator");
        });
  }

  Value shape_of() {
    const Shape& s = input(0).shape;
    int64_t rank = int64_t(s.size());
    int64_t start = attr_int("start", 0), end = attr_int("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    std::vector<int64_t> dims;
    for (int64_t k = start; k < end; ++k) dims.push_back(s[k]);
    return make_const_ints({int64_t(dims.size())}, dims);
  }

  Value constant_of_shape() {
    Shape shape = const_ints(0, "shape");
    Value fill = make_const_floats("f32", {1}, {0.0});
    if (const auto* a = attr("value")) fill = tensor_value(a->t(), where_);
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0 || (d > 0 && n > (int64_t(1) << 40) / d))
        fail(where_ + ": shape " + shape_to_string(shape) + " is negative or too large");
      n *= d;
    }
    if (fill.count() != 1) fail(where_ + ": value must hold one element");
    if (n > 4096) {  // large: filled when the program runs, not spelled out here
      Value out;
      out.elem = fill.elem;
      out.shape = shape;
      out.ssa = filled(fill.elem, shape, fill.as_double(0));
      return out;
    }
    Value c;
    c.is_const = true;
    c.elem = fill.elem;
    c.shape = shape;
    if (is_float_type(c.elem))
      c.f.assign(n, fill.f.at(0));
    else
      c.i.assign(n, fill.i.at(0));
    return c;
  }

  Value range() {
    const Value& start = const_input(0, "start");
    const Value& limit = const_input(1, "limit");
    const Value& delta = const_input(2, "delta");
    double s = start.as_double(0), l = limit.as_double(0), d = delta.as_double(0);
    if (d == 0) fail(where_ + ": delta is 0");
    double steps = std::ceil((l - s) / d);
    if (!(steps <= double(1 << 24)))
      fail(where_ + ": more than 2^24 values (or not a number of them)");
    int64_t n = std::max<int64_t>(0, int64_t(steps));
    if (is_float_type(start.elem)) {
      std::vector<double> v;
      for (int64_t k = 0; k < n; ++k) v.push_back(s + double(k) * d);
      return make_const_floats(start.elem, {n}, v);
    }
    std::vector<int64_t> v;
    for (int64_t k = 0; k < n; ++k) v.push_back(start.i[0] + k * delta.i[0]);
    return make_const_ints({n}, v, start.elem);
  }

  Value reshape_node() {
    Value& x = input(0);
    std::vector<int64_t> target =
        opset_ >= 5 ? const_ints(1, "shape") : attr_ints("shape").value_or(std::vector<int64_t>{});
    bool allowzero = attr_int("allowzero", 0) != 0;
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < target.size(); ++k) {
      if (target[k] == 0 && !allowzero) {
        if (k >= x.shape.size()) fail(where_ + ": a 0 in the shape has no input dimension");
        target[k] = x.shape[k];
      }
      if (target[k] == -1) {
        if (infer >= 0) fail(where_ + ": two -1 dimensions in the shape");
        infer = int64_t(k);
      } else {
        known *= target[k];
      }
    }
    if (infer >= 0) target[infer] = known == 0 ? 0 : x.count() / known;
    return reshape(x, target);
  }

  Value flatten() {
    Value& x = input(0);
    int64_t rank = int64_t(x.shape.size());
    int64_t axis = attr_int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) fail(where_ + ": axis out of range");
    return reshape(x, {product(x.shape, 0, axis), product(x.shape, axis)});
  }

  Value squeeze_unsqueeze(bool squeeze) {
    Value& x = input(0);
    std::optional<std::vector<int64_t>> axes;
    if (opset_ >= 13) {
      if (has_input(1)) axes = const_ints(1, "axes");
    } else {
      axes = attr_ints("axes");
    }
    Shape shape;
    int64_t rank = int64_t(x.shape.size());
    if (squeeze) {
      std::set<int64_t> drop;
      if (axes) {
        for (int64_t a : *axes) drop.insert(normalize_axis(a, rank, where_));
      } else {
        for (int64_t k = 0; k < rank; ++k)
          if (x.shape[k] == 1) drop.insert(k);
      }
      for (int64_t k = 0; k < rank; ++k)
        if (!drop.count(k)) shape.push_back(x.shape[k]);
    } else {
      if (!axes) fail(where_ + ": no axes");
      int64_t out_rank = rank + int64_t(axes->size());
      std::set<int64_t> add;
      for (int64_t a : *axes) add.insert(normalize_axis(a, out_rank, where_));
      size_t src = 0;
      for (int64_t k = 0; k < out_rank; ++k) shape.push_back(add.count(k) ? 1 : x.shape[src++]);
    }
    return reshape(x, shape);
  }

  Value transpose_node() {
    Value& x = input(0);
    std::vector<int64_t> perm;
    if (auto p = attr_ints("perm")) {
      perm = *p;
    } else {
      for (int64_t k = int64_t(x.shape.size()) - 1; k >= 0; --k) perm.push_back(k);
    }
    for (int64_t& p : perm) p = normalize_axis(p, int64_t(x.shape.size()), where_);
    return transpose(x, perm);
  }

  Value concat_node() {
    std::vector<Value*> parts;
    for (int k = 0; k < node_->input_size(); ++k)
      if (has_input(k)) parts.push_back(&input(k));
    int64_t axis = normalize_axis(attr_int("axis", 0), int64_t(parts[0]->shape.size()), where_);
    return concat(parts, axis);
  }

  Value slice_node() {
    Value& x = input(0);
    int64_t rank = int64_t(x.shape.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ >= 10) {
      starts = const_ints(1, "starts");
      ends = const_ints(2, "ends");
      if (has_input(3)) axes = const_ints(3, "axes");
      if (has_input(4)) steps = const_ints(4, "steps");
    } else {
      starts = attr_ints("starts").value_or(std::vector<int64_t>{});
      ends = attr_ints("ends").value_or(std::vector<int64_t>{});
      axes = attr_ints("axes").value_or(std::vector<int64_t>{});
    }
    if (axes.empty())
      for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    Shape offsets(rank, 0), sizes = x.shape, strides(rank, 1);
    bool reversed = false;
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = normalize_axis(axes[k], rank, where_);
      int64_t dim = x.shape[a], step = steps[k];
      if (step == 0) fail(where_ + ": step 0");
      int64_t s = starts[k], e = ends[k];
      if (s < 0) s += dim;
      if (e < 0) e += dim;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        offsets[a] = s;
        sizes[a] = e > s ? (e - s + step - 1) / step : 0;
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        sizes[a] = s > e ? (s - e + (-step) - 1) / (-step) : 0;
        offsets[a] = s;
        reversed = true;
      }
      strides[a] = step;
    }
    if (!reversed || x.is_const) {
      if (x.is_const) {
        Value c;
        c.is_const = true;
        c.elem = x.elem;
        c.shape = sizes;
        for (int64_t out = 0; out < product(sizes); ++out) {
          int64_t rem = out, src = 0;
          std::vector<int64_t> idx(rank);
          for (int64_t k = rank - 1; k >= 0; --k) {
            idx[k] = rem % sizes[k];
            rem /= sizes[k];
          }
          for (int64_t k = 0; k < rank; ++k)
            src = src * x.shape[k] + offsets[k] + idx[k] * strides[k];
          if (is_float_type(x.elem))
            c.f.push_back(x.f[src]);
          else
            c.i.push_back(x.i[src]);
        }
        return c;
      }
      return slice(x, offsets, sizes, strides);
    }
    // Negative steps: a generic that reads x at offset + index * step.
    return index_map(x, sizes, [&, offsets, strides](int k, const std::string& idx) {
      if (strides[k] == 1 && offsets[k] == 0) return idx;
      std::string r = fresh();
      line("  " + r + " = affine.apply affine_map<(d0) -> (d0 * " + std::to_string(strides[k]) +
           " + " + std::to_string(offsets[k]) + ")>(" + idx + ")");
      return r;
    });
  }

  // out[i...] = x[f(i)...]: a generic over the output reading x with tensor.extract.
  Value index_map(Value& x, const Shape& out_shape,
                  const std::function<std::string(int, const std::string&)>& source_index) {
    std::string xs = ssa(x);
    std::string xt = x.type();
    return elementwise({}, x.elem, out_shape, [&, xs, xt](const std::vector<std::string>&) {
      std::vector<std::string> idx;
      for (size_t k = 0; k < out_shape.size(); ++k)
        idx.push_back(source_index(int(k), index_of(int(k))));
      std::string r = fresh();
      std::string list;
      for (size_t k = 0; k < idx.size(); ++k) list += (k ? ", " : "") + idx[k];
      line("  " + r + " = tensor.extract " + xs + "[" + list + "] : " + xt);
      return r;
    });
  }

  std::vector<Value> split_node() {
    Value& x = input(0);
    int64_t rank = int64_t(x.shape.size());
    int64_t axis = normalize_axis(attr_int("axis", 0), rank, where_);
    std::vector<int64_t> parts;
    if (opset_ >= 13 && has_input(1))
      parts = const_ints(1, "split");
    else if (opset_ < 13)
      parts = attr_ints("split").value_or(std::vector<int64_t>{});
    int outputs = node_->output_size();
    if (parts.empty()) {
      int64_t each = (x.shape[axis] + outputs - 1) / outputs;
      for (int k = 0; k < outputs; ++k) parts.push_back(std::min(each, x.shape[axis] - each * k));
    }
    std::vector<Value> out;
    int64_t offset = 0;
    for (int64_t p : parts) {
      Shape offsets(rank, 0), sizes = x.shape, strides(rank, 1);
      offsets[axis] = offset;
      sizes[axis] = p;
      out.push_back(slice(x, offsets, sizes, strides));
      offset += p;
    }
    return out;
  }

  // Emits (in a body) the index `raw` (of `elem`) as an index into a dimension of `dim`:
  // negative ones wrapped, then clamped so no read leaves the tensor (ONNX leaves them undefined).
  std::string checked_index(const std::string& raw, const std::string& elem, int64_t dim) {
    std::string i = op("arith.index_cast", {raw}, elem + " to index");
    std::string zero = k_in_body("index", 0);
    std::string neg = cmp("index", "", "slt", i, zero);
    std::string wrapped = op("arith.addi", {i, k_in_body("index", double(dim))}, "index");
    std::string idx = select(neg, wrapped, i, "index");
    idx = op("arith.minsi", {idx, k_in_body("index", double(std::max<int64_t>(dim - 1, 0)))},
             "index");
    return op("arith.maxsi", {idx, zero}, "index");
  }
  std::string extract(const std::string& tensor, const std::string& type,
                      const std::vector<std::string>& at) {
    std::string r = fresh(), list;
    for (size_t k = 0; k < at.size(); ++k) list += (k ? ", " : "") + at[k];
    line("  " + r + " = tensor.extract " + tensor + "[" + list + "] : " + type);
    return r;
  }

  Value gather_elements() {
    Value& data = input(0);
    Value& indices = input(1);
    int64_t rank = int64_t(data.shape.size());
    int64_t axis = normalize_axis(attr_int("axis", 0), rank, where_);
    if (int64_t(indices.shape.size()) != rank)
      fail(where_ + ": data and indices must have the same rank");
    std::string ds = ssa(data), dt = data.type(), ielem = indices.elem, elem = data.elem;
    int64_t dim = data.shape[axis];
    return elementwise(
        {&indices}, elem, indices.shape, [&, axis, rank, dim](const std::vector<std::string>& a) {
          std::vector<std::string> at;
          for (int64_t k = 0; k < rank; ++k)
            at.push_back(k == axis ? checked_index(a[0], ielem, dim) : index_of(int(k)));
          return extract(ds, dt, at);
        });
  }

  Value log_softmax_axis1(Value x) {
    std::string elem = x.elem;
    Value max = reduce(
        x, {1}, true, elem, -std::numeric_limits<double>::infinity(),
        [](const std::string& v) { return v; },
        [&, elem](const std::string& a, const std::string& v) {
          return op("arith.maximumf", {a, v}, elem);
        });
    Value shifted = binary("Sub", x, max);
    Value e = unary("Exp", shifted);
    Value sum = sum_over(e, {1});
    return binary("Sub", shifted, unary("Log", sum));
  }

  // NegativeLogLikelihoodLoss on log-probabilities (N, C, d...) and targets (N, d...), with
  // optional class weights, ignore_index and reduction none / sum / mean (weighted).
  Value nll_loss(Value& log_prob) {
    Value& target = input(1);
    std::string elem = log_prob.elem, telem = target.elem;
    int64_t classes = log_prob.shape.size() > 1 ? log_prob.shape[1] : 0;
    if (int64_t(target.shape.size()) + 1 != int64_t(log_prob.shape.size()))
      fail(where_ + ": the target must have the input's rank minus one");
    std::optional<int64_t> ignore;
    if (attr("ignore_index")) ignore = attr_int("ignore_index", 0);
    bool weighted = has_input(2);
    Value weight;
    if (weighted) weight = input(2);
    std::string ps = ssa(log_prob), pt = log_prob.type();
    std::string ws = weighted ? ssa(weight) : "", wt = weighted ? weight.type() : "";
    int64_t rank = int64_t(target.shape.size());
    // w[n, d] = weight of the target class, 0 where ignored.
    Value w = elementwise(
        {&target}, elem, target.shape,
        [&, ignore, weighted, classes](const std::vector<std::string>& a) {
          std::string one = weighted ? extract(ws, wt, {checked_index(a[0], telem, classes)})
                                     : k_in_body(elem, 1);
          if (!ignore) return one;
          std::string skip = cmp(telem, "", "eq", a[0], k_in_body(telem, double(*ignore)));
          return select(skip, k_in_body(elem, 0), one, elem);
        });
    Value loss = elementwise(
        {&target, &w}, elem, target.shape, [&, rank, classes](const std::vector<std::string>& a) {
          std::vector<std::string> at = {index_of(0), checked_index(a[0], telem, classes)};
          for (int64_t k = 1; k < rank; ++k) at.push_back(index_of(int(k)));
          std::string p = extract(ps, pt, at);
          return op("arith.negf", {op("arith.mulf", {p, a[1]}, elem)}, elem);
        });
    std::string reduction = attr_string("reduction", "mean");
    if (reduction == "none") return loss;
    std::vector<int64_t> all;
    for (int64_t k = 0; k < rank; ++k) all.push_back(k);
    auto add = [&, elem](const std::string& acc, const std::string& v) {
      return sum_step(acc, v, elem);
    };
    auto id = [](const std::string& v) { return v; };
    Value total = reduce(loss, all, false, elem, 0, id, add);
    if (reduction == "sum") return total;
    if (reduction != "mean") fail(where_ + ": reduction '" + reduction + "' is not supported");
    Value weight_total = reduce(w, all, false, elem, 0, id, add);
    return binary("Div", total, weight_total);
  }

  Value mod() {
    Value a = input(0), b = input(1);
    Shape shape = broadcast_shapes({a.shape, b.shape}, where_);
    std::string elem = a.elem;
    bool fmod = attr_int("fmod", 0) != 0;
    if (is_float_type(elem) && !fmod) fail(where_ + ": floating Mod needs fmod=1");
    return elementwise({&a, &b}, elem, shape, [&, elem, fmod](const std::vector<std::string>& x) {
      if (is_float_type(elem)) return op("arith.remf", {x[0], x[1]}, elem);
      std::string r = op("arith.remsi", {x[0], x[1]}, elem);
      if (fmod) return r;  // C's sign (of the dividend)
      // Python's sign (of the divisor): add the divisor where the signs differ and r != 0.
      std::string zero = k_in_body(elem, 0);
      std::string nonzero = cmp(elem, "", "ne", r, zero);
      std::string r_neg = cmp(elem, "", "slt", r, zero);
      std::string b_neg = cmp(elem, "", "slt", x[1], zero);
      std::string differ = op("arith.xori", {r_neg, b_neg}, "i1");
      std::string fix = op("arith.andi", {nonzero, differ}, "i1");
      return select(fix, op("arith.addi", {r, x[1]}, elem), r, elem);
    });
  }

  Value is_inf_nan(bool nan) {
    Value x = input(0);
    std::string elem = x.elem;
    bool pos = attr_int("detect_positive", 1) != 0, neg = attr_int("detect_negative", 1) != 0;
    return elementwise({&x}, "i1", x.shape,
                       [&, elem, nan, pos, neg](const std::vector<std::string>& a) {
                         if (nan) return cmp(elem, "uno", "", a[0], a[0]);
                         double inf = std::numeric_limits<double>::infinity();
                         std::string p = cmp(elem, "oeq", "", a[0], k_in_body(elem, inf));
                         std::string n = cmp(elem, "oeq", "", a[0], k_in_body(elem, -inf));
                         if (pos && neg) return op("arith.ori", {p, n}, "i1");
                         if (pos) return p;
                         if (neg) return n;
                         return k_in_body("i1", 0);
                       });
  }

  // 1 at the first maximum along `axis` (opset 13; before it, of the flattened trailing dims).
  Value hardmax() {
    Value x = input(0);
    int64_t rank = int64_t(x.shape.size());
    int64_t axis = normalize_axis(attr_int("axis", opset_ >= 13 ? -1 : 1), rank, where_);
    Shape original = x.shape;
    if (opset_ < 13) {
      x = reshape(x, {product(original, 0, axis), product(original, axis)});
      axis = 1;
    }
    std::string elem = x.elem;
    Value first = arg_reduce_value(x, axis, true);  // the first maximum, kept dims, i64
    Value y =
        elementwise({&first}, elem, x.shape, [&, elem, axis](const std::vector<std::string>& a) {
          std::string i = op("arith.index_cast", {a[0]}, "i64 to index");
          std::string hit = cmp("index", "", "eq", i, index_of(int(axis)));
          return select(hit, k_in_body(elem, 1), k_in_body(elem, 0), elem);
        });
    return reshape(y, original);
  }

  std::vector<Value> dropout() {
    Value x = input(0);
    bool training = false;
    if (opset_ >= 12 && has_input(2)) training = const_input(2, "training_mode").as_int(0) != 0;
    if (opset_ < 7) training = attr_int("is_test", 0) == 0 && attr("is_test");
    double ratio = has_input(1) ? const_input(1, "ratio").as_double(0) : attr_float("ratio", 0.5);
    if (training && ratio != 0)
      fail(where_ +
           ": Dropout in training mode draws random numbers; kiln runs inference "
           "(training_mode false)");
    Value mask = make_const_ints(x.shape, std::vector<int64_t>(size_t(x.count()), 1), "i1");
    return {x, mask};
  }

  // Where one output coordinate of a resized dimension reads: `taps` input positions (clamped
  // to the edge) with their weights, or the extrapolation value.
  struct ResizeTaps {
    std::vector<int64_t> index;
    std::vector<double> weight;
    bool outside = false;
  };

  std::vector<ResizeTaps> resize_taps(int64_t in, int64_t out, double scale,
                                      const std::string& mode, const std::string& ctm,
                                      const std::string& nearest_mode, double cubic_a,
                                      bool exclude_outside, double roi_start, double roi_end) {
    std::vector<ResizeTaps> taps(static_cast<size_t>(out));
    size_t tap_count = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
    // ONNX's reference scales by the unrounded output length (input length × scale).
    double out_len = double(in) * scale;
    for (int64_t o = 0; o < out; ++o) {
      double x;
      if (ctm == "half_pixel")
        x = (o + 0.5) / scale - 0.5;
      else if (ctm == "pytorch_half_pixel")
        x = out_len > 1 ? (o + 0.5) / scale - 0.5 : 0;
      else if (ctm == "align_corners")
        x = out_len == 1 ? 0 : o * double(in - 1) / (out_len - 1);
      else if (ctm == "asymmetric")
        x = o / scale;
      else if (ctm == "tf_half_pixel_for_nn")
        x = (o + 0.5) / scale;
      else if (ctm == "tf_crop_and_resize")
        x = out_len > 1
                ? roi_start * (in - 1) + o * (roi_end - roi_start) * (in - 1) / (out_len - 1)
                : 0.5 * (roi_start + roi_end) * (in - 1);
      else
        fail(where_ + ": coordinate_transformation_mode '" + ctm + "' is not supported");
      ResizeTaps& t = taps[size_t(o)];
      if (ctm == "tf_crop_and_resize" && (x < 0 || x > in - 1)) {
        t.outside = true;
        t.index.assign(tap_count, 0);
        t.weight.assign(tap_count, 0);
        continue;
      }
      auto clamp = [in](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
      if (mode == "nearest") {
        double fl = std::floor(x), frac = x - fl;
        int64_t i;
        if (nearest_mode == "floor")
          i = int64_t(fl);
        else if (nearest_mode == "ceil")
          i = int64_t(std::ceil(x));
        else if (nearest_mode == "round_prefer_ceil")
          i = int64_t(frac >= 0.5 ? fl + 1 : fl);
        else if (nearest_mode == "round_prefer_floor")
          i = int64_t(frac > 0.5 ? fl + 1 : fl);
        else
          fail(where_ + ": nearest_mode '" + nearest_mode + "' is not supported");
        t.index = {clamp(i)};
        t.weight = {1};
        continue;
      }
      int64_t x0 = int64_t(std::floor(x));
      double r = x - double(x0);
      std::vector<int64_t> raw;
      if (mode == "linear") {
        raw = {x0, x0 + 1};
        t.weight = {1 - r, r};
      } else if (mode == "cubic") {
        double a = cubic_a;
        auto far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
        auto near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
        raw = {x0 - 1, x0, x0 + 1, x0 + 2};
        t.weight = {far(r + 1), near(r), near(1 - r), far(2 - r)};
      } else {
        fail(where_ + ": mode '" + mode + "' is not supported");
      }
      if (exclude_outside) {
        double sum = 0;
        for (size_t j = 0; j < raw.size(); ++j) {
          if (raw[j] < 0 || raw[j] >= in) t.weight[j] = 0;
          sum += t.weight[j];
        }
        if (sum != 0)
          for (double& w : t.weight) w /= sum;
      }
      for (int64_t i : raw) t.index.push_back(clamp(i));
    }
    return taps;
  }

  // Resize (opsets 10+) and Upsample: every output element a weighted sum of input elements whose
  // positions and weights are computed here (shapes are static), one table per resized dimension.
  Value resize(bool upsample) {
    Value x = input(0);
    size_t rank = x.shape.size();
    std::string mode = attr_string("mode", "nearest");
    if (mode == "bilinear" || mode == "trilinear") mode = "linear";
    bool old = upsample || opset_ < 11;
    std::string ctm =
        old ? "asymmetric" : attr_string("coordinate_transformation_mode", "half_pixel");
    std::string nearest_mode = old ? "floor" : attr_string("nearest_mode", "round_prefer_floor");
    if (old && mode == "nearest") nearest_mode = "floor";
    double cubic_a = attr_float("cubic_coeff_a", -0.75);
    bool exclude_outside = attr_int("exclude_outside", 0) != 0;
    double extrapolation = attr_float("extrapolation_value", 0);
    std::vector<double> scales, roi;
    Shape sizes;
    auto floats_of = [&](int k, const std::string& what) {
      const Value& v = const_input(k, what);
      std::vector<double> out;
      for (int64_t j = 0; j < v.count(); ++j) out.push_back(v.as_double(j));
      return out;
    };
    if (upsample && opset_ < 9) {
      auto a = attr("scales");
      if (a) scales.assign(a->floats().begin(), a->floats().end());
    } else if (old) {
      scales = floats_of(1, "scales");
    } else {
      if (has_input(1)) roi = floats_of(1, "roi");
      if (has_input(2)) scales = floats_of(2, "scales");
      if (has_input(3)) sizes = const_ints(3, "sizes");
    }
    if (!sizes.empty()) {
      if (sizes.size() != rank) fail(where_ + ": sizes does not match the input's rank");
      scales.clear();
      for (size_t k = 0; k < rank; ++k) scales.push_back(double(sizes[k]) / double(x.shape[k]));
    } else {
      if (scales.size() != rank) fail(where_ + ": scales does not match the input's rank");
      for (size_t k = 0; k < rank; ++k) {
        if (!(scales[k] > 0)) fail(where_ + ": scales must be positive");
        sizes.push_back(int64_t(std::floor(double(x.shape[k]) * scales[k])));
      }
    }
    if (product(sizes) > (int64_t(1) << 32)) fail(where_ + ": the output is too large");
    if (!roi.empty() && roi.size() != 2 * rank) fail(where_ + ": roi must hold 2 values per axis");
    if (mode != "nearest" && !is_float_type(x.elem))
      fail(where_ + ": " + mode + " resizing of " + x.elem + " is not supported");
    // Per dimension: taps, or nothing where output position o reads input position o.
    std::vector<std::vector<ResizeTaps>> tables(rank);
    std::vector<size_t> resized;
    bool any_outside = false;
    for (size_t k = 0; k < rank; ++k) {
      double start = roi.empty() ? 0 : roi[k], end = roi.empty() ? 1 : roi[k + rank];
      auto taps = resize_taps(x.shape[k], sizes[k], scales[k], mode, ctm, nearest_mode, cubic_a,
                              exclude_outside, start, end);
      bool identity = sizes[k] == x.shape[k];
      for (int64_t o = 0; o < sizes[k] && identity; ++o) {
        const ResizeTaps& t = taps[size_t(o)];
        for (size_t j = 0; j < t.index.size(); ++j)
          identity &= t.weight[j] == 0 || (t.index[j] == o && t.weight[j] == 1);
        identity &= !t.outside;
      }
      if (identity) continue;
      for (const auto& t : taps) any_outside |= t.outside;
      tables[k] = std::move(taps);
      resized.push_back(k);
    }
    if (resized.empty()) return x;
    size_t tap_count = tables[resized[0]][0].index.size();
    int64_t combos = 1;
    for (size_t r = 0; r < resized.size(); ++r) combos *= int64_t(tap_count);
    if (combos > 256)
      fail(where_ + ": resizing " + std::to_string(resized.size()) + " dimensions at once with " +
           mode + " is not supported");
    // Tables as constants: index (out_k x taps, index) and weight (out_k x taps, elem).
    std::vector<std::string> index_tables, weight_tables, outside_tables;
    std::string elem = x.elem;
    for (size_t k : resized) {
      Value idx = make_const_ints({sizes[k], int64_t(tap_count)}, {}, "i64");
      Value wt =
          make_const_floats(is_float_type(elem) ? elem : "f32", {sizes[k], int64_t(tap_count)}, {});
      Value out = make_const_ints({sizes[k]}, {}, "i1");
      for (const auto& t : tables[k]) {
        for (size_t j = 0; j < tap_count; ++j) {
          idx.i.push_back(t.index[j]);
          wt.f.push_back(elem == "f32" ? double(float(t.weight[j])) : t.weight[j]);
        }
        out.i.push_back(t.outside);
      }
      index_tables.push_back(ssa(idx) + "|" + idx.type());
      weight_tables.push_back(ssa(wt) + "|" + wt.type());
      outside_tables.push_back(ssa(out) + "|" + out.type());
    }
    std::string xs = ssa(x), xt = x.type();
    auto split = [](const std::string& s) {
      size_t bar = s.find('|');
      return std::make_pair(s.substr(0, bar), s.substr(bar + 1));
    };
    return elementwise({}, elem, sizes,
                       [&, rank, tap_count, combos, mode, extrapolation,
                        any_outside](const std::vector<std::string>&) {
                         std::vector<std::string> position(rank);
                         for (size_t k = 0; k < rank; ++k) position[k] = index_of(int(k));
                         bool f = is_float_type(elem);
                         std::string acc = f ? k_in_body(elem, 0) : "";
                         for (int64_t combo = 0; combo < combos; ++combo) {
                           std::vector<std::string> at = position;
                           std::string weight;
                           int64_t rest = combo;
                           for (size_t r = 0; r < resized.size(); ++r) {
                             size_t k = resized[r];
                             std::string j = k_in_body("index", double(rest % int64_t(tap_count)));
                             rest /= int64_t(tap_count);
                             auto [it, itype] = split(index_tables[r]);
                             std::string i64 = extract(it, itype, {position[k], j});
                             at[k] = op("arith.index_cast", {i64}, "i64 to index");
                             if (f) {
                               auto [wt, wtype] = split(weight_tables[r]);
                               std::string w = extract(wt, wtype, {position[k], j});
                               weight = weight.empty() ? w : op("arith.mulf", {weight, w}, elem);
                             }
                           }
                           std::string v = extract(xs, xt, at);
                           if (!f) return v;  // nearest: one tap
                           acc = op("arith.addf", {acc, op("arith.mulf", {v, weight}, elem)}, elem);
                         }
                         if (!any_outside) return acc;
                         std::string outside = "";
                         for (size_t r = 0; r < resized.size(); ++r) {
                           auto [ot, otype] = split(outside_tables[r]);
                           std::string o = extract(ot, otype, {position[resized[r]]});
                           outside = outside.empty() ? o : op("arith.ori", {outside, o}, "i1");
                         }
                         return select(outside, k_in_body(elem, extrapolation), acc, elem);
                       });
  }

  // ---- recurrent layers: unrolled over the (static) sequence -----------------------------------
  Value take(Value v, int64_t axis, int64_t index) {  // v[..., index, ...] without that axis
    Shape offsets(v.shape.size(), 0), sizes = v.shape, steps(v.shape.size(), 1);
    offsets[axis] = index;
    sizes[axis] = 1;
    Value s = slice(v, offsets, sizes, steps);
    Shape dropped = v.shape;
    dropped.erase(dropped.begin() + axis);
    return reshape(s, dropped);
  }
  Value columns(Value v, int64_t from, int64_t count) {  // v[:, from : from + count]
    Shape offsets = {0, from}, sizes = {v.shape[0], count}, steps = {1, 1};
    return slice(v, offsets, sizes, steps);
  }
  Value activation(const std::string& name, Value x, double clip) {
    if (clip > 0) {
      Value lo = make_const_floats(x.elem, {}, {-clip}), hi = make_const_floats(x.elem, {}, {clip});
      x = binary("Min", binary("Max", x, lo), hi);
    }
    static const std::set<std::string> plain = {"Sigmoid", "Tanh", "Relu", "Softsign", "Softplus"};
    if (!plain.count(name))
      fail(where_ + ": activation '" + name +
           "' is not supported (Sigmoid, Tanh, Relu, Softsign "
           "and Softplus are)");
    return unary(name, x);
  }

  // LSTM, GRU and RNN (opsets 7 and 14): forward, reverse or bidirectional; biases, initial
  // states, peepholes, clip, linear_before_reset, layout; sequence_lens compiled in.
  std::vector<Value> recurrent(const std::string& kind) {
    Value x = input(0), w = input(1), r = input(2);
    int64_t layout = attr_int("layout", 0);
    if (x.shape.size() != 3) fail(where_ + ": X must have rank 3");
    if (layout == 1) x = transpose(x, {1, 0, 2});
    int64_t seq = x.shape[0], batch = x.shape[1], in = x.shape[2];
    if (seq > 1024)
      fail(where_ + ": sequences of more than 1024 steps are not supported (unrolled)");
    int64_t hidden = attr_int("hidden_size", r.shape.size() == 3 ? r.shape[2] : 0);
    std::string direction = attr_string("direction", "forward");
    int64_t dirs = direction == "bidirectional" ? 2 : 1;
    int64_t gates = kind == "LSTM" ? 4 : kind == "GRU" ? 3 : 1;
    if (w.shape != Shape{dirs, gates * hidden, in} ||
        r.shape != Shape{dirs, gates * hidden, hidden})
      fail(where_ + ": W or R does not match hidden_size, the input and the direction");
    if (attr_int("input_forget", 0) != 0) fail(where_ + ": input_forget is not supported");
    double clip = attr("clip") ? attr_float("clip", 0) : 0;
    bool linear_before_reset = attr_int("linear_before_reset", 0) != 0;
    std::vector<std::string> acts;
    if (auto a = attr("activations"))
      for (const auto& name : a->strings()) acts.push_back(name);
    if (attr("activation_alpha") || attr("activation_beta"))
      fail(where_ + ": activation_alpha and activation_beta are not supported");
    std::vector<std::string> defaults =
        kind == "LSTM"  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
        : kind == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                        : std::vector<std::string>{"Tanh"};
    if (acts.empty())
      for (int64_t d = 0; d < dirs; ++d) acts.insert(acts.end(), defaults.begin(), defaults.end());
    if (acts.size() != defaults.size() * size_t(dirs))
      fail(where_ + ": activations has the wrong length");
    std::optional<std::vector<int64_t>> lengths;
    if (has_input(4)) {
      lengths = const_ints(4, "sequence_lens");
      if (int64_t(lengths->size()) != batch)
        fail(where_ + ": sequence_lens must have batch values");
      for (int64_t& l : *lengths) l = std::clamp<int64_t>(l, 0, seq);
    }
    std::string elem = x.elem;
    Value x2 = reshape(x, {seq * batch, in});
    std::vector<Value> y_dirs, h_dirs, c_dirs;
    for (int64_t d = 0; d < dirs; ++d) {
      bool reverse = direction == "reverse" || d == 1;
      Value wd = take(w, 0, d), rd = take(r, 0, d);
      Value wt = transpose(wd, {1, 0}), rt = transpose(rd, {1, 0});
      Value xw = matmul(x2, wt);  // every step's input projection at once: (seq*batch, gates*H)
      Value wb, rb;
      bool biased = has_input(3);
      if (biased) {
        Value bd = take(input(3), 0, d);  // (2 * gates * H): Wb then Rb
        Value bd2 = reshape(bd, {1, 2 * gates * hidden});
        wb = reshape(columns(bd2, 0, gates * hidden), {gates * hidden});
        rb = reshape(columns(bd2, gates * hidden, gates * hidden), {gates * hidden});
        xw = binary("Add", xw, wb);
      }
      Value h = has_input(5) ? take(input(5), 0, d)
                             : make_const_floats(elem, {batch, hidden},
                                                 std::vector<double>(size_t(batch * hidden), 0));
      Value c = kind == "LSTM" && has_input(6)
                    ? take(input(6), 0, d)
                    : make_const_floats(elem, {batch, hidden},
                                        std::vector<double>(size_t(batch * hidden), 0));
      Value peep;
      bool peepholes = kind == "LSTM" && has_input(7);
      if (peepholes) peep = reshape(take(input(7), 0, d), {1, 3 * hidden});
      const std::string* act = &acts[size_t(d) * defaults.size()];
      std::vector<Value> outputs(static_cast<size_t>(seq));
      for (int64_t step = 0; step < seq; ++step) {
        int64_t t = reverse ? seq - 1 - step : step;
        Shape offsets = {t * batch, 0}, sizes = {batch, gates * hidden}, steps = {1, 1};
        Value xt = slice(xw, offsets, sizes, steps);
        Value hr = matmul(h, rt);
        if (biased && !(kind == "GRU" && linear_before_reset)) hr = binary("Add", hr, rb);
        Value h_new, c_new;
        if (kind == "RNN") {
          h_new = activation(act[0], binary("Add", xt, hr), clip);
        } else if (kind == "LSTM") {
          Value g = binary("Add", xt, hr);
          Value gi = columns(g, 0, hidden), go = columns(g, hidden, hidden),
                gf = columns(g, 2 * hidden, hidden), gc = columns(g, 3 * hidden, hidden);
          if (peepholes) {
            gi = binary("Add", gi, binary("Mul", c, columns(peep, 0, hidden)));
            gf = binary("Add", gf, binary("Mul", c, columns(peep, 2 * hidden, hidden)));
          }
          Value i = activation(act[0], gi, clip), f = activation(act[0], gf, clip);
          Value cc = activation(act[1], gc, clip);
          c_new = binary("Add", binary("Mul", f, c), binary("Mul", i, cc));
          if (peepholes)
            go = binary("Add", go, binary("Mul", c_new, columns(peep, hidden, hidden)));
          Value o = activation(act[0], go, clip);
          h_new = binary("Mul", o, activation(act[2], c_new, 0));
        } else {  // GRU: z, r, h
          Value xz = columns(xt, 0, hidden), xr = columns(xt, hidden, hidden),
                xh = columns(xt, 2 * hidden, hidden);
          Value hz = columns(hr, 0, hidden), hrr = columns(hr, hidden, hidden);
          if (linear_before_reset && biased) {
            Value rb2 = reshape(rb, {1, gates * hidden});
            hz = binary("Add", hz, columns(rb2, 0, hidden));
            hrr = binary("Add", hrr, columns(rb2, hidden, hidden));
          }
          Value z = activation(act[0], binary("Add", xz, hz), clip);
          Value rg = activation(act[0], binary("Add", xr, hrr), clip);
          Value candidate;
          if (linear_before_reset) {
            Value hh = columns(hr, 2 * hidden, hidden);
            if (biased) {
              Value rb2 = reshape(rb, {1, gates * hidden});
              hh = binary("Add", hh, columns(rb2, 2 * hidden, hidden));
            }
            candidate = binary("Add", xh, binary("Mul", rg, hh));
          } else {
            Value rh = binary("Mul", rg, h);
            Value rt_h = columns(rt, 2 * hidden, hidden);
            candidate = binary("Add", xh, matmul(rh, rt_h));
            if (biased) {
              Value rb2 = reshape(rb, {1, gates * hidden});
              candidate = binary("Add", candidate, columns(rb2, 2 * hidden, hidden));
            }
          }
          Value hc = activation(act[1], candidate, clip);
          Value one = make_const_floats(elem, {}, {1});
          h_new = binary("Add", binary("Mul", binary("Sub", one, z), hc), binary("Mul", z, h));
        }
        Value y = h_new;
        if (lengths) {  // batch entries past their length keep their state and output zeros
          std::vector<int64_t> live;
          for (int64_t l : *lengths) live.push_back(t < l ? 1 : 0);
          Value mask = make_const_ints({batch, 1}, live, "i1");
          Value zeros = make_const_floats(elem, {}, {0});
          y = where_of(mask, h_new, zeros);
          h_new = where_of(mask, h_new, h);
          if (kind == "LSTM") c_new = where_of(mask, c_new, c);
        }
        h = h_new;
        if (kind == "LSTM") c = c_new;
        outputs[size_t(t)] = reshape(y, {1, 1, batch, hidden});
      }
      std::vector<Value*> parts;
      for (Value& o : outputs) parts.push_back(&o);
      y_dirs.push_back(concat(parts, 0));
      h_dirs.push_back(reshape(h, {1, batch, hidden}));
      c_dirs.push_back(reshape(c, {1, batch, hidden}));
    }
    auto join = [&](std::vector<Value>& v, int64_t axis) {
      if (v.size() == 1) return v[0];
      std::vector<Value*> parts = {&v[0], &v[1]};
      return concat(parts, axis);
    };
    Value y = join(y_dirs, 1), y_h = join(h_dirs, 0), y_c = join(c_dirs, 0);
    if (layout == 1) {
      y = transpose(y, {2, 0, 1, 3});
      y_h = transpose(y_h, {1, 0, 2});
      y_c = transpose(y_c, {1, 0, 2});
    }
    return {y, y_h, y_c};
  }

  // DepthToSpace (DCR or CRD) and SpaceToDepth: a reshape, a transpose and a reshape.
  Value depth_space(bool to_space) {
    Value x = input(0);
    int64_t b = attr_int("blocksize", 0);
    if (x.shape.size() != 4 || b < 1) fail(where_ + ": needs a 4-D input and a positive blocksize");
    int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
    if (to_space) {
      if (c % (b * b)) fail(where_ + ": channels are not a multiple of blocksize squared");
      bool crd = attr_string("mode", "DCR") == "CRD";
      Value t =
          crd ? reshape(x, {n, c / (b * b), b, b, h, w}) : reshape(x, {n, b, b, c / (b * b), h, w});
      Value p = crd ? transpose(t, {0, 1, 4, 2, 5, 3}) : transpose(t, {0, 3, 4, 1, 5, 2});
      return reshape(p, {n, c / (b * b), h * b, w * b});
    }
    if (h % b || w % b) fail(where_ + ": height and width are not multiples of blocksize");
    Value t = reshape(x, {n, c, h / b, b, w / b, b});
    Value p = transpose(t, {0, 3, 5, 1, 2, 4});
    return reshape(p, {n, c * b * b, h / b, w / b});
  }

  Value eye_like() {
    Value& x = input(0);
    if (x.shape.size() != 2) fail(where_ + ": the input must be 2-D");
    std::string elem = attr("dtype") ? elem_or_fail(int32_t(attr_int("dtype", 1)), where_) : x.elem;
    int64_t k = attr_int("k", 0);
    return elementwise({}, elem, x.shape, [&, elem, k](const std::vector<std::string>&) {
      std::string diff = op("arith.subi", {index_of(1), index_of(0)}, "index");
      std::string on = cmp("index", "", "eq", diff, k_in_body("index", double(k)));
      return select(on, k_in_body(elem, 1), k_in_body(elem, 0), elem);
    });
  }

  // Normalised over the spatial dimensions of each (batch, channel), then scaled and shifted.
  Value instance_norm() {
    Value x = input(0);
    if (x.shape.size() < 3) fail(where_ + ": the input must have rank 3 or more");
    double eps = attr_float("epsilon", 1e-5);
    std::vector<int64_t> axes;
    for (size_t k = 2; k < x.shape.size(); ++k) axes.push_back(int64_t(k));
    double count = double(product(x.shape, 2));
    std::string elem = x.elem;
    Value n = make_const_floats(elem, {}, {count});
    Value mean = binary("Div", sum_over(x, axes), n);
    Value centered = binary("Sub", x, mean);
    Value squared = binary("Mul", centered, centered);
    Value var = binary("Div", sum_over(squared, axes), n);
    Shape per_channel(x.shape.size() - 1, 1);
    per_channel[0] = x.shape[1];
    Value scale = reshape(input(1), per_channel), bias = reshape(input(2), per_channel);
    return elementwise({&centered, &var, &scale, &bias}, elem, x.shape,
                       [&, elem, eps](const std::vector<std::string>& a) {
                         std::string denom =
                             op("math.sqrt", {op("arith.addf", {a[1], k_in_body(elem, eps)}, elem)},
                                elem);
                         std::string y = op("arith.divf", {a[0], denom}, elem);
                         return op("arith.addf", {op("arith.mulf", {y, a[2]}, elem), a[3]}, elem);
                       });
  }

  Value one_hot() {
    Value& indices = input(0);
    int64_t depth = int64_t(const_input(1, "depth").as_double(0));
    const Value& values = const_input(2, "values");
    if (values.count() != 2) fail(where_ + ": values must hold [off, on]");
    if (depth < 1) fail(where_ + ": depth must be positive");
    int64_t rank = int64_t(indices.shape.size()) + 1;
    int64_t axis = normalize_axis(attr_int("axis", -1), rank, where_);
    Shape shape = indices.shape;
    shape.insert(shape.begin() + axis, depth);
    std::string elem = values.elem, ielem = indices.elem;
    double off = values.as_double(0), on = values.as_double(1);
    // The indices read with the depth dimension dropped.
    std::string map = "affine_map<(" + dims_list(shape.size()) + ") -> (";
    bool first = true;
    for (int64_t k = 0; k < rank; ++k) {
      if (k == axis) continue;
      map += (first ? "d" : ", d") + std::to_string(k);
      first = false;
    }
    map += ")>";
    Value out = open_one_input_generic(indices, map, elem, shape);
    std::string iv = "%b" + std::to_string(next_id_++), ov = "%b" + std::to_string(next_id_++);
    line("^bb0(" + iv + ": " + ielem + ", " + ov + ": " + elem + "):");
    std::string i = is_float_type(ielem) ? op("arith.fptosi", {iv}, ielem + " to i64")
                                         : convert(iv, ielem, "i64");
    std::string neg = cmp("i64", "", "slt", i, k_in_body("i64", 0));
    i = select(neg, op("arith.addi", {i, k_in_body("i64", double(depth))}, "i64"), i, "i64");
    std::string position = op("arith.index_cast", {index_of(int(axis))}, "index to i64");
    std::string hit = cmp("i64", "", "eq", i, position);
    line("  linalg.yield " + select(hit, k_in_body(elem, on), k_in_body(elem, off), elem) + " : " +
         elem);
    line("} -> " + out.type());
    return out;
  }

  // Hann, Hamming and Blackman windows of a compiled-in length: constants.
  Value window_fn(const std::string& t) {
    int64_t size = const_input(0, "size").as_int(0);
    if (size < 0 || size > (int64_t(1) << 20)) fail(where_ + ": the window size is out of range");
    bool periodic = attr_int("periodic", 1) != 0;
    std::string elem = elem_or_fail(int32_t(attr_int("output_datatype", 1)), where_);
    double n_total = double(periodic ? size : size - 1);
    std::vector<double> values;
    const double pi = 3.14159265358979323846;
    for (int64_t n = 0; n < size; ++n) {
      double phase = n_total > 0 ? 2 * pi * double(n) / n_total : 0;
      double v;
      if (t == "HannWindow")
        v = 0.5 - 0.5 * std::cos(phase);
      else if (t == "HammingWindow")
        v = 25.0 / 46 - (1 - 25.0 / 46) * std::cos(phase);
      else
        v = 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2 * phase);
      values.push_back(elem == "f32" ? double(float(v)) : v);
    }
    if (is_float_type(elem)) return make_const_floats(elem, {size}, values);
    std::vector<int64_t> ints;
    for (double v : values) ints.push_back(int64_t(v));
    return make_const_ints({size}, ints, elem);
  }

  Value where_of(Value& cond, Value& a, Value& b) {
    Shape shape = broadcast_shapes({cond.shape, a.shape, b.shape}, where_);
    std::string elem = a.elem;
    return elementwise({&cond, &a, &b}, elem, shape, [&, elem](const std::vector<std::string>& v) {
      return select(v[0], v[1], v[2], elem);
    });
  }

  Value gather() {
    Value& data = input(0);
    Value& indices = input(1);
    int64_t rank = int64_t(data.shape.size());
    int64_t axis = normalize_axis(attr_int("axis", 0), rank, where_);
    Shape shape(data.shape.begin(), data.shape.begin() + axis);
    shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
    shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
    int64_t dim = data.shape[axis];
    if (indices.is_const) {
      for (int64_t k = 0; k < indices.count(); ++k) {
        int64_t i = indices.i[k];
        if (i < -dim || i >= dim)
          fail(where_ + ": index " + std::to_string(i) + " is out of range for a dimension of " +
               std::to_string(dim));
      }
      if (data.is_const) {
        Value c;
        c.is_const = true;
        c.elem = data.elem;
        c.shape = shape;
        int64_t outer = product(data.shape, 0, axis), inner = product(data.shape, axis + 1);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t k = 0; k < indices.count(); ++k) {
            int64_t i = indices.i[k] < 0 ? indices.i[k] + dim : indices.i[k];
            for (int64_t j = 0; j < inner; ++j) {
              int64_t src = (o * dim + i) * inner + j;
              if (is_float_type(c.elem))
                c.f.push_back(data.f[src]);
              else
                c.i.push_back(data.i[src]);
            }
          }
        return c;
      }
      if (indices.count() == 1) {  // one index: a slice (PyTorch's x[:, -1])
        int64_t i = indices.i[0] < 0 ? indices.i[0] + dim : indices.i[0];
        Shape offsets(rank, 0), sizes = data.shape, strides(rank, 1);
        offsets[axis] = i;
        sizes[axis] = 1;
        Value s = slice(data, offsets, sizes, strides);
        return reshape(s, shape);
      }
    }
    // Run-time indices (or many constant ones): a generic reading data with tensor.extract.
    std::string ds = ssa(data), dt = data.type();
    std::string index_elem = indices.elem;
    int64_t irank = int64_t(indices.shape.size());
    Shape idx_shape = indices.shape;
    // Indices are an input of the generic, mapped to their output dimensions.
    std::vector<std::string> names;
    Value out;
    out.elem = data.elem;
    out.shape = shape;
    std::string init = empty(data.elem, shape);
    out.ssa = fresh();
    std::string imap = "affine_map<(" + dims_list(shape.size()) + ") -> (";
    for (int64_t k = 0; k < irank; ++k)
      imap += (k ? ", " : "") + std::string("d") + std::to_string(axis + k);
    imap += ")>";
    line(out.ssa + " = linalg.generic {indexing_maps = [" + imap + ", " +
         broadcast_map(shape, shape) +
         "], iterator_types = " + iterators(std::vector<bool>(shape.size(), false)) + "} ins(" +
         ssa(indices) + " : " + indices.type() + ") outs(" + init + " : " + out.type() + ") {");
    std::string iv = "%b" + std::to_string(next_id_++), ov = "%b" + std::to_string(next_id_++);
    line("^bb0(" + iv + ": " + index_elem + ", " + ov + ": " + data.elem + "):");
    std::string as_index = fresh();
    line("  " + as_index + " = arith.index_cast " + iv + " : " + index_elem + " to index");
    std::string dim_c = fresh();
    line("  " + dim_c + " = arith.constant " + std::to_string(dim) + " : index");
    std::string zero = fresh();
    line("  " + zero + " = arith.constant 0 : index");
    std::string neg = fresh();
    line("  " + neg + " = arith.cmpi slt, " + as_index + ", " + zero + " : index");
    std::string wrapped = fresh();
    line("  " + wrapped + " = arith.addi " + as_index + ", " + dim_c + " : index");
    std::string idx = fresh();
    line("  " + idx + " = arith.select " + neg + ", " + wrapped + ", " + as_index + " : index");
    // Out-of-range indices would read outside the tensor: clamp (ONNX leaves them undefined).
    std::string max_i = fresh();
    line("  " + max_i + " = arith.constant " + std::to_string(std::max<int64_t>(dim - 1, 0)) +
         " : index");
    std::string clamped = fresh();
    line("  " + clamped + " = arith.minsi " + idx + ", " + max_i + " : index");
    std::string clamped2 = fresh();
    line("  " + clamped2 + " = arith.maxsi " + clamped + ", " + zero + " : index");
    std::vector<std::string> src;
    for (int64_t k = 0; k < axis; ++k) src.push_back(index_of(int(k)));
    src.push_back(clamped2);
    for (int64_t k = axis + 1; k < rank; ++k) src.push_back(index_of(int(k + irank - 1)));
    std::string list;
    for (size_t k = 0; k < src.size(); ++k) list += (k ? ", " : "") + src[k];
    std::string r = fresh();
    line("  " + r + " = tensor.extract " + ds + "[" + list + "] : " + dt);
    line("  linalg.yield " + r + " : " + data.elem);
    line("} -> " + out.type());
    return out;
  }

  Value expand() {
    Value& x = input(0);
    Shape target = const_ints(1, "shape");
    Shape shape = broadcast_shapes({x.shape, target}, where_);
    if (x.is_const && product(shape) <= 4096) {
      Value c;
      c.is_const = true;
      c.elem = x.elem;
      c.shape = shape;
      for (int64_t k = 0; k < product(shape); ++k) {
        int64_t j = broadcast_index(k, shape, x.shape);
        if (is_float_type(c.elem))
          c.f.push_back(x.f[j]);
        else
          c.i.push_back(x.i[j]);
      }
      return c;
    }
    return broadcast_to(x, shape);
  }

  Value tile() {
    Value& x = input(0);
    std::vector<int64_t> repeats = const_ints(1, "repeats");
    Shape shape = x.shape;
    for (size_t k = 0; k < shape.size(); ++k) shape[k] *= repeats.at(k);
    Shape in_shape = x.shape;
    return index_map(x, shape, [&, in_shape](int k, const std::string& idx) {
      if (in_shape[k] == shape[k]) return idx;
      std::string r = fresh();
      line("  " + r + " = affine.apply affine_map<(d0) -> (d0 mod " + std::to_string(in_shape[k]) +
           ")>(" + idx + ")");
      return r;
    });
  }

  Value pad_node() {
    Value& x = input(0);
    std::string mode = attr_string("mode", "constant");
    if (mode != "constant" && mode != "edge" && mode != "reflect")
      fail(where_ + ": pad mode '" + mode + "' is not supported");
    std::vector<int64_t> pads;
    double value = 0;
    if (opset_ >= 11) {
      pads = const_ints(1, "pads");
      if (has_input(2)) value = const_input(2, "constant_value").as_double(0);
    } else {
      pads = attr_ints("pads").value_or(std::vector<int64_t>{});
      value = attr_float("value", 0);
    }
    size_t rank = x.shape.size();
    Shape low(rank, 0), high(rank, 0);
    if (opset_ >= 18 && has_input(3)) fail(where_ + ": axes are not supported");
    if (pads.size() != 2 * rank) fail(where_ + ": pads has the wrong length");
    // Negative pads crop: pad by the positive ones, then slice.
    Shape offsets(rank, 0), sizes(rank), steps(rank, 1);
    bool crop = false;
    for (size_t k = 0; k < rank; ++k) {
      low[k] = std::max<int64_t>(pads[k], 0);
      high[k] = std::max<int64_t>(pads[k + rank], 0);
      offsets[k] = std::max<int64_t>(-pads[k], 0);
      sizes[k] = x.shape[k] + pads[k] + pads[k + rank];
      crop |= pads[k] < 0 || pads[k + rank] < 0;
      if (sizes[k] < 0) fail(where_ + ": the pads remove more than the input holds");
      if (mode == "reflect" && (low[k] >= x.shape[k] || high[k] >= x.shape[k]))
        fail(where_ + ": reflect pads must be smaller than the dimension they pad");
      if (mode == "edge" && x.shape[k] == 0 && (low[k] || high[k]))
        fail(where_ + ": edge pads of an empty dimension");
    }
    Value padded =
        mode == "constant" ? pad(x, low, high, value) : pad_from_input(x, low, high, mode);
    if (!crop) return padded;
    return slice(padded, offsets, sizes, steps);
  }

  // Edge or reflect padding: each output element reads the input at its position less the low
  // pad, clamped to the edge or mirrored about it.
  Value pad_from_input(Value& x, const Shape& low, const Shape& high, const std::string& mode) {
    Shape shape = x.shape;
    for (size_t k = 0; k < shape.size(); ++k) shape[k] += low[k] + high[k];
    std::string xs = ssa(x), xt = x.type(), elem = x.elem;
    Shape in = x.shape;
    return elementwise({}, elem, shape, [&, in, low, mode](const std::vector<std::string>&) {
      std::vector<std::string> at;
      for (size_t k = 0; k < in.size(); ++k) {
        std::string i =
            op("arith.subi", {index_of(int(k)), k_in_body("index", double(low[k]))}, "index");
        std::string zero = k_in_body("index", 0), last = k_in_body("index", double(in[k] - 1));
        if (mode == "edge") {
          i = op("arith.maxsi", {op("arith.minsi", {i, last}, "index"), zero}, "index");
        } else {  // reflect: -i below, 2 * last - i above
          std::string below = cmp("index", "", "slt", i, zero);
          i = select(below, op("arith.subi", {zero, i}, "index"), i, "index");
          std::string above = cmp("index", "", "sgt", i, last);
          std::string mirrored =
              op("arith.subi", {op("arith.addi", {last, last}, "index"), i}, "index");
          i = select(above, mirrored, i, "index");
        }
        at.push_back(i);
      }
      return extract(xs, xt, at);
    });
  }

  Value matmul(Value& a_in, Value& b_in) {
    Value a = a_in, b = b_in;
    bool a_vec = a.shape.size() == 1, b_vec = b.shape.size() == 1;
    if (a_vec) a = reshape(a, {1, a.shape[0]});
    if (b_vec) b = reshape(b, {b.shape[0], 1});
    if (a.elem != b.elem) fail(where_ + ": inputs of different element types");
    size_t ra = a.shape.size(), rb = b.shape.size();
    int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
    if (b.shape[rb - 2] != k)
      fail(where_ + ": shapes " + shape_to_string(a_in.shape) + " and " +
           shape_to_string(b_in.shape) + " cannot be multiplied");
    Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
    Shape batch = broadcast_shapes({batch_a, batch_b}, where_);
    Shape out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    std::string elem = a.elem;
    Value result;
    if (batch_b.empty() || product(batch_b) == 1) {
      // [batch..., M, K] x [K, N]: one matmul over the flattened rows.
      Value a2 = broadcast_to(a, [&] {
        Shape s = batch;
        s.push_back(m);
        s.push_back(k);
        return s;
      }());
      Value a_flat = reshape(a2, {product(batch) * m, k});
      Value b_flat = reshape(b, {k, n});
      Value r = contraction("linalg.matmul", a_flat, b_flat, {product(batch) * m, n}, elem);
      result = reshape(r, out_shape);
    } else {
      Shape sa = batch, sb = batch;
      sa.push_back(m);
      sa.push_back(k);
      sb.push_back(k);
      sb.push_back(n);
      Value a2 = broadcast_to(a, sa), b2 = broadcast_to(b, sb);
      int64_t nb = product(batch);
      Value a3 = reshape(a2, {nb, m, k}), b3 = reshape(b2, {nb, k, n});
      Value r = contraction("linalg.batch_matmul", a3, b3, {nb, m, n}, elem);
      result = reshape(r, out_shape);
    }
    if (a_vec || b_vec) {
      Shape s = batch;
      if (!a_vec) s.push_back(m);
      if (!b_vec) s.push_back(n);
      result = reshape(result, s);
    }
    return result;
  }

  Value contraction(const std::string& name, Value& a, Value& b, const Shape& out_shape,
                    const std::string& elem) {
    std::string acc = filled(elem, out_shape, 0);
    Value out;
    out.elem = elem;
    out.shape = out_shape;
    out.ssa = fresh();
    line(out.ssa + " = " + name + " ins(" + ssa(a) + ", " + ssa(b) + " : " + a.type() + ", " +
         b.type() + ") outs(" + acc + " : " + out.type() + ") -> " + out.type());
    return out;
  }

  Value gemm() {
    Value a = input(0), b = input(1);
    if (attr_int("transA", 0)) a = transpose(a, {1, 0});
    // A classifier's weights come as (out, in) with transB: transposed once, at load.
    if (attr_int("transB", 0) && b.shape.size() == 2)
      b = transposed_weights(b, b.shape[0], b.shape[1]);
    else if (attr_int("transB", 0))
      b = transpose(b, {1, 0});
    double alpha = attr_float("alpha", 1.0), beta = attr_float("beta", 1.0);
    Value y = matmul(a, b);
    if (alpha != 1.0) {
      Value k = make_const_floats(y.elem, {}, {alpha});
      y = binary("Mul", y, k);
    }
    if (has_input(2) && beta != 0.0) {
      Value c = input(2);
      if (beta != 1.0) {
        Value k = make_const_floats(c.elem, {}, {beta});
        c = binary("Mul", c, k);
      }
      y = binary("Add", y, c);
    }
    return y;
  }

  // Spatial attributes of Conv and pools: kernel, strides, dilations, pads (low, high).
  struct Window {
    Shape kernel, strides, dilations, low, high, out;
  };
  Window window(const Shape& in_spatial, const Shape& kernel, bool ceil_mode) {
    size_t n = in_spatial.size();
    Window w;
    w.kernel = kernel;
    w.strides = attr_ints("strides").value_or(Shape(n, 1));
    w.dilations = attr_ints("dilations").value_or(Shape(n, 1));
    Shape pads = attr_ints("pads").value_or(Shape(2 * n, 0));
    if (w.strides.size() != n || w.dilations.size() != n || pads.size() != 2 * n)
      fail(where_ + ": strides, dilations or pads do not match the kernel's rank");
    std::string auto_pad = attr_string("auto_pad", "NOTSET");
    w.low.assign(pads.begin(), pads.begin() + n);
    w.high.assign(pads.begin() + n, pads.end());
    for (size_t k = 0; k < n; ++k) {
      int64_t extent = (kernel[k] - 1) * w.dilations[k] + 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        int64_t out = (in_spatial[k] + w.strides[k] - 1) / w.strides[k];
        int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[k] + extent - in_spatial[k]);
        w.low[k] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        w.high[k] = total - w.low[k];
      } else if (auto_pad == "VALID") {
        w.low[k] = w.high[k] = 0;
      }
      int64_t padded = in_spatial[k] + w.low[k] + w.high[k];
      if (padded < extent) fail(where_ + ": the kernel is larger than the padded input");
      int64_t span = padded - extent;
      int64_t out =
          ceil_mode ? (span + w.strides[k] - 1) / w.strides[k] + 1 : span / w.strides[k] + 1;
      // A last window that would start in the end padding is dropped (ONNX, PyTorch).
      if (ceil_mode && (out - 1) * w.strides[k] >= in_spatial[k] + w.low[k]) --out;
      w.out.push_back(out);
    }
    return w;
  }

  static std::string i64_list(const Shape& s) {
    std::string out;
    for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
    return out;
  }

  // Conv, 1-D to 3-D; groups, depthwise, bias.
  Value conv() {
    Value x = input(0), w = input(1);
    size_t spatial = x.shape.size() - 2;
    if (x.shape.size() < 3 || spatial > 3 || w.shape.size() != x.shape.size())
      fail(where_ + ": only 1-D, 2-D and 3-D convolutions are supported");
    Shape kernel(w.shape.begin() + 2, w.shape.end());
    if (auto ks = attr_ints("kernel_shape")) kernel = *ks;
    if (kernel.size() != spatial) fail(where_ + ": kernel_shape does not match the input's rank");
    Window win = window(Shape(x.shape.begin() + 2, x.shape.end()), kernel, false);
    int64_t c = x.shape[1], f = w.shape[0];
    int64_t group = attr_int("group", 1);
    if (group < 1 || c % group || f % group || w.shape[1] != c / group)
      fail(where_ + ": channels do not match the groups");
    Shape low = {0, 0}, high = {0, 0};
    low.insert(low.end(), win.low.begin(), win.low.end());
    high.insert(high.end(), win.high.begin(), win.high.end());
    Value y;
    if (winograd_applies(x, w, win, group)) {
      y = winograd_conv(x, w, win);
    } else if (int64_t extra_rows = shifted_tap_extra_rows(x, w, win, group); extra_rows >= 0) {
      high[2] += extra_rows;
      Value padded = pad(x, low, high, 0);
      y = conv_as_shifted_matmuls(padded, w, win.dilations, win.out);
    } else if (phase_planes_apply(x, w, win, group)) {
      std::optional<Expansion> expansion = expansion_of(node_->input(0));
      if (expansion &&
          phase_plane_layout({x.shape[2], x.shape[3]}, win, w.shape[2], w.shape[3]).columns() <
              kMinExpansionColumns)
        expansion.reset();
      y = expansion ? expanded_phase_taps(*expansion, w, win) : depthwise_phase_taps(x, w, win);
    } else {
      Value padded = pad(x, low, high, 0);
      y = conv_core(padded, w, win.strides, win.dilations, group, win.out);
    }
    if (has_input(2)) {
      if (bias_waits_for_pool(*node_))
        deferred_bias_[node_->output(0)] = input(2);
      else
        y = add_channel_bias(y, input(2));
    }
    return y;
  }

  // The node reading `name`, when it is the only reader and `name` is not a graph output.
  const onnx::NodeProto* only_reader(const std::string& name) const {
    if (graph_outputs_.count(name) || consumers_.count(name) != 1) return nullptr;
    return consumers_.find(name)->second;
  }

  static bool pools_a_relu(const onnx::NodeProto& pool) {
    return pool.op_type() == "MaxPool" && pool.input_size() == 1 &&
           (pool.output_size() == 1 || pool.output(1).empty());
  }

  // Whether a float Conv's bias can be added after the max pool its ReLU feeds: pool(relu(x + b))
  // is relu(pool(x) + b) for a per-channel b, and the pool (which takes the ReLU after it, see
  // before_relu) then adds it to its 4x smaller output in its own kernel instead of a pass over
  // the Conv's output (resnet18's and squeezenet1_1's stems).
  bool bias_waits_for_pool(const onnx::NodeProto& conv) {
    if (conv.output_size() != 1 || !is_float_type(input(0).elem)) return false;
    const onnx::NodeProto* relu = only_reader(conv.output(0));
    if (relu == nullptr || relu->op_type() != "Relu" || relu->input_size() != 1) return false;
    const onnx::NodeProto* pool = only_reader(relu->output(0));
    return pool != nullptr && pools_a_relu(*pool);
  }

  // Whether a strided depthwise convolution runs as taps over phase planes
  // (depthwise_phase_taps): one NCHW float image, 2-D, stride above 1 but not above the kernel
  // (every plane is read), no dilation, output rows wide enough to vectorise, and an input that
  // is not already channels-last (those go channels-last, where a stride only changes which
  // pixel is read).
  bool phase_planes_apply(const Value& x, const Value& w, const Window& win, int64_t group) {
    if (x.shape.size() != 4 || x.shape[0] != 1 || !is_float_type(x.elem) || x.is_const)
      return false;
    int64_t c = x.shape[1];
    if (group != c || w.shape[0] != c || w.shape[1] != 1) return false;
    if (win.strides[0] < 2 && win.strides[1] < 2) return false;
    if (win.strides[0] > w.shape[2] || win.strides[1] > w.shape[3]) return false;
    if (win.dilations[0] != 1 || win.dilations[1] != 1) return false;
    if (win.out[1] < kMinRowForTaps || channels_last_of_.count(x.ssa)) return false;
    for (int64_t d : x.shape)
      if (d <= 0) return false;
    return true;
  }

  // A strided depthwise convolution as the sum of its taps, each a unit-stride view. The padded
  // input is split by the strides into phase planes, one tensor (SH*SW, C, EH, EW): plane (a, b)
  // holds the padded pixels at rows a, a+SH, ... and columns b, b+SW, ..., copied from the input
  // (every S-th pixel), the padding filled around them. Tap (i, j) then reads plane
  // (i % SH, j % SW) shifted by (i / SH, j / SW): contiguous along the output row, like a
  // stride-1 convolution's taps (depthwise_taps), where reading every other pixel of the padded
  // input would not vectorise. The copies are the kernels that compute the input can be merged
  // into (clone_into_gathering_copies in the compiler): then no padded input is written at all.
  Value depthwise_phase_taps(Value& x, Value& w, const Window& win) {
    Value planes = phase_planes(x, win, w.shape[2], w.shape[3]);
    return taps_over_planes(planes, w, win, false);
  }

  // The taps of a strided depthwise convolution over its input's phase planes (see
  // phase_planes, `channel_major` their layout), summed into its (1, C, OH, OW) output.
  Value taps_over_planes(Value& planes, Value& w, const Window& win, bool channel_major) {
    int64_t c = w.shape[0], kh = w.shape[2], kw = w.shape[3];
    int64_t oh = win.out[0], ow = win.out[1], sh = win.strides[0], sw = win.strides[1];
    Value per_tap = prepared_weights(w, {2, 3, 0, 1}, {kh * kw, c, 1, 1});
    Value sum;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        int64_t p = (i % sh) * sw + j % sw;
        Value tap = slice(per_tap, {i * kw + j, 0, 0, 0}, {1, c, 1, 1}, {1, 1, 1, 1});
        Value term;
        if (channel_major) {
          // The (C, 1, OH, OW) view read as (1, C, OH, OW) by the kernel itself: a reshape
          // between would keep the sum from fusing with the bias and activation after it.
          Value shifted = slice(planes, {0, p, i / sh, j / sw}, {c, 1, oh, ow}, {1, 1, 1, 1});
          std::string swapped = "affine_map<(d0, d1, d2, d3) -> (d1, d0, d2, d3)>";
          term =
              elementwise_at({&shifted, &tap}, {swapped, broadcast_map(tap.shape, {1, c, oh, ow})},
                             w.elem, {1, c, oh, ow}, [&](const std::vector<std::string>& a) {
                               return op("arith.mulf", {a[0], a[1]}, w.elem);
                             });
        } else {
          Value shifted = slice(planes, {p, 0, i / sh, j / sw}, {1, c, oh, ow}, {1, 1, 1, 1});
          term = binary("Mul", shifted, tap);
        }
        sum = (i == 0 && j == 0) ? term : binary("Add", sum, term);
      }
    return sum;
  }

  // A pointwise convolution and the activation after it that compute a strided depthwise
  // convolution's input, and nothing else: mobilenet_v2's expansions (ReLU6) and
  // efficientnet_b0's (SiLU, x * Sigmoid(x)) before a stride 2.
  struct Expansion {
    Value input, weights;
    std::optional<Value> bias;
    bool silu = false;
    // Otherwise the activation: clamps, applied in order (Relu: a low bound of 0).
    struct Clamp {
      std::optional<double> low, high;
    };
    std::vector<Clamp> clamps;
  };
  using Clamp = Expansion::Clamp;

  // Whether `conv` is a 1x1 convolution of stride 1 without padding or groups.
  static bool pointwise_conv(const onnx::NodeProto& conv) {
    if (conv.op_type() != "Conv" || conv.input_size() < 2 || conv.output_size() != 1) return false;
    for (const auto& a : conv.attribute()) {
      const std::string& n = a.name();
      if (n == "group" && a.i() != 1) return false;
      if (n == "auto_pad" && a.s() != "NOTSET" && a.s() != "VALID") return false;
      if (n == "kernel_shape" || n == "strides" || n == "dilations" || n == "pads")
        for (int64_t v : a.ints())
          if (v != (n == "pads" ? 0 : 1)) return false;
    }
    return true;
  }

  // The Expansion computing the value `name`, when it is a float image of one batch that is read
  // by the current node alone.
  std::optional<Expansion> expansion_of(const std::string& name) {
    auto made = producer_.find(name);
    if (made == producer_.end() || graph_outputs_.count(name) || consumers_.count(name) != 1)
      return std::nullopt;
    const onnx::NodeProto* act = made->second;
    Expansion e;
    std::string product = act->input_size() > 0 ? act->input(0) : "";
    if (act->op_type() == "Mul" && act->input_size() == 2) {
      // x * Sigmoid(x), x read by these two alone.
      for (int k = 0; k < 2 && !e.silu; ++k) {
        auto sigmoid = producer_.find(act->input(1 - k));
        if (sigmoid == producer_.end() || sigmoid->second->op_type() != "Sigmoid" ||
            sigmoid->second->input_size() != 1 || sigmoid->second->input(0) != act->input(k) ||
            only_reader(act->input(1 - k)) != act || graph_outputs_.count(act->input(k)) ||
            consumers_.count(act->input(k)) != 2)
          continue;
        e.silu = true;
        product = act->input(k);
      }
      if (!e.silu) return std::nullopt;
    } else {
      // Relu and Clip nodes, each read by the next alone (F.relu6 exports as Relu then Clip).
      while (true) {
        Clamp clamp;
        if (act->op_type() == "Relu" && act->input_size() == 1) {
          clamp.low = 0;
        } else if (act->op_type() == "Clip" && opset_ >= 11 && act->input_size() >= 1) {
          for (int k = 1; k < act->input_size() && k < 3; ++k) {
            if (act->input(k).empty()) continue;
            auto bound = values_.find(act->input(k));
            if (bound == values_.end() || !bound->second.is_const || bound->second.count() != 1)
              return std::nullopt;
            (k == 1 ? clamp.low : clamp.high) = bound->second.as_double(0);
          }
        } else {
          break;
        }
        e.clamps.insert(e.clamps.begin(), clamp);
        product = act->input(0);
        auto before = producer_.find(product);
        if (before == producer_.end() || only_reader(product) != act) return std::nullopt;
        act = before->second;
      }
      if (e.clamps.empty()) return std::nullopt;
    }
    auto conv_made = producer_.find(product);
    if (conv_made == producer_.end()) return std::nullopt;
    const onnx::NodeProto* conv = conv_made->second;
    if (!pointwise_conv(*conv)) return std::nullopt;
    auto x = values_.find(conv->input(0)), w = values_.find(conv->input(1));
    if (x == values_.end() || w == values_.end()) return std::nullopt;
    e.input = x->second;
    e.weights = w->second;
    const Shape& xs = e.input.shape;
    if (xs.size() != 4 || xs[0] != 1 || e.input.is_const || e.input.elem != "f32")
      return std::nullopt;
    if (e.weights.shape != Shape{e.weights.shape[0], xs[1], 1, 1} || e.weights.elem != "f32")
      return std::nullopt;
    if (conv->input_size() > 2 && !conv->input(2).empty()) {
      auto bias = values_.find(conv->input(2));
      if (bias == values_.end() || bias->second.shape != Shape{e.weights.shape[0]})
        return std::nullopt;
      e.bias = bias->second;
    }
    return e;
  }

  // Expansions whose planes have fewer columns stay separate kernels: rounding so few columns up
  // to whole product tiles would waste much of the product. (Unpadded, the planes' odd widths
  // made every expansion below 8192 columns slower on planes; padded, those of mobilenet_v2 and
  // efficientnet_b0 with 900 columns or more are all faster: docs/BENCHMARKS.md, session 30.)
  static constexpr int64_t kMinExpansionColumns = 512;
  // The default product tile's columns (compiler_cpu/pgle_codegen.cc, epilogue_fusion.cc).
  static constexpr int64_t kPlaneColumnGranule = 128;

  // A strided depthwise convolution of an Expansion's output, the expansion computed on the
  // phase planes of its own input: the product's columns are those planes, (C, SH*SW*EH*EW), so
  // it writes the depthwise's planes itself, its bias and activation on each tile while in
  // cache (epilogue fusion) and zero where a plane is padding. Without this the product's output
  // is read again by the kernels that split it into planes (mobilenet_v2's 16 -> 96 expansion at
  // 112x112: 0.36 ms of copies after a 0.50 ms product).
  Value expanded_phase_taps(Expansion& e, Value& w, const Window& win) {
    int64_t c = e.input.shape[1], f = e.weights.shape[0];
    PhasePlanes layout =
        phase_plane_layout({e.input.shape[2], e.input.shape[3]}, win, w.shape[2], w.shape[3]);
    int64_t plane = layout.extent[0] * layout.extent[1], columns = layout.columns();
    // The product's columns rounded up to whole cache tiles, the extra ones zero: its tiles and
    // their register tiles are then whole (no masked remainder), and so are the epilogue's rows.
    int64_t padded =
        (columns + kPlaneColumnGranule - 1) / kPlaneColumnGranule * kPlaneColumnGranule;
    const Shape planes_shape = {layout.count(), layout.extent[0], layout.extent[1]};
    // The planes are written into the first `columns` columns of the padded operand directly.
    Value cols = empty_value(e.input.elem, {c, padded});
    fill_region(cols, {0, columns}, {c, padded - columns});
    Value head = slice(cols, {0, 0}, {c, columns}, {1, 1});
    Value head_planes = regroup_columns(head, planes_shape);
    Value input_planes = phase_planes(e.input, win, w.shape[2], w.shape[3], true, &head_planes);
    Value written = regroup_columns(input_planes, {});
    insert_region(cols, written, {0, 0});
    Value weights = reshape(e.weights, {f, c});
    Value product = matmul(weights, cols);
    std::vector<double> inside(padded, 0.0);
    for (int64_t p = 0; p < layout.count(); ++p) {
      const PlaneRegion& region = layout.planes[p];
      for (int64_t r = region.first[0]; r < region.first[0] + region.count[0]; ++r)
        for (int64_t q = region.first[1]; q < region.first[1] + region.count[1]; ++q)
          inside[p * plane + r * layout.extent[1] + q] = 1.0;
    }
    Value mask = make_const_floats("f32", {padded}, std::move(inside));
    std::vector<Value*> ins = {&product, &mask};
    Value bias;
    if (e.bias) {
      bias = reshape(*e.bias, {f, 1});
      ins.push_back(&bias);
    }
    std::vector<Clamp> clamps = e.clamps;
    bool silu = e.silu;
    Value activated =
        elementwise(ins, "f32", {f, padded}, [&, clamps, silu](const std::vector<std::string>& a) {
          std::string v = a.size() > 2 ? op("arith.addf", {a[0], a[2]}, "f32") : a[0];
          if (silu) {  // as Sigmoid and Mul compute it unfused
            std::string e = op("math.exp", {op("arith.negf", {v}, "f32")}, "f32");
            std::string one = k_in_body("f32", 1);
            std::string sigmoid = op("arith.divf", {one, op("arith.addf", {one, e}, "f32")}, "f32");
            v = op("arith.mulf", {v, sigmoid}, "f32");
          }
          for (const Clamp& clamp : clamps) {
            if (clamp.low) v = op("arith.maximumf", {v, k_in_body("f32", *clamp.low)}, "f32");
            if (clamp.high) v = op("arith.minimumf", {v, k_in_body("f32", *clamp.high)}, "f32");
          }
          std::string in = cmp("f32", "one", "ne", a[1], k_in_body("f32", 0));
          return select(in, v, k_in_body("f32", 0), "f32");
        });
    Value used = slice(activated, {0, 0}, {f, columns}, {1, 1});
    Value planes = regroup_columns(used, planes_shape);
    return taps_over_planes(planes, w, win, true);
  }

  // Where the padded input of a strided KHxKW window operation lies in its phase planes: each
  // plane spans the output plus the taps' largest shift (`extent`), and plane a * SW + b holds
  // input pixels at rows [first[0], first[0] + count[0]) and columns [first[1], ...), input row
  // source[0] + r * SH at plane row first[0] + r; the rest of the plane is padding.
  struct PlaneRegion {
    int64_t first[2], count[2], source[2];
  };
  struct PhasePlanes {
    int64_t stride[2], extent[2];
    std::vector<PlaneRegion> planes;
    int64_t count() const { return stride[0] * stride[1]; }
    int64_t columns() const { return count() * extent[0] * extent[1]; }  // SH*SW*EH*EW
  };
  static PhasePlanes phase_plane_layout(const Shape& in_spatial, const Window& win, int64_t kh,
                                        int64_t kw) {
    PhasePlanes layout;
    const int64_t in[2] = {in_spatial[0], in_spatial[1]};
    layout.stride[0] = win.strides[0];
    layout.stride[1] = win.strides[1];
    layout.extent[0] = win.out[0] + (kh - 1) / win.strides[0];
    layout.extent[1] = win.out[1] + (kw - 1) / win.strides[1];
    for (int64_t a = 0; a < layout.stride[0]; ++a)
      for (int64_t b = 0; b < layout.stride[1]; ++b) {
        // Plane (a, b)'s row r is padded row r * S + a, input row r * S + a - pad: the rows that
        // fall inside the input, [first, first + count), are copied from it; the rest is padding.
        const int64_t phase[2] = {a, b};
        PlaneRegion region;
        for (int k = 0; k < 2; ++k) {
          int64_t stride = layout.stride[k], extent = layout.extent[k];
          int64_t shift = phase[k] - win.low[k];
          region.first[k] = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
          int64_t reach = in[k] - 1 - shift;  // floor division: may be negative
          int64_t last =
              std::min(extent - 1, reach >= 0 ? reach / stride : -((-reach + stride - 1) / stride));
          region.count[k] = std::max<int64_t>(0, last - region.first[k] + 1);
          if (region.count[k] == 0) region.first[k] = extent;
          region.source[k] = region.first[k] * stride + shift;
        }
        layout.planes.push_back(region);
      }
    return layout;
  }

  // The padded input of a strided window operation on one NCHW image split into its phase planes,
  // one tensor (SH*SW, C, EH, EW), or (C, SH*SW, EH, EW) when `channel_major`: plane a * SW + b
  // holds the padded pixels at rows a, a+SH, ... and columns b, b+SW, ..., copied from the input
  // (every S-th pixel), its padding filled around them. A KHxKW window's tap (i, j) at output
  // pixel (r, q) is then plane (i % SH) * SW + j % SW at (r + i / SH, q + j / SW): unit stride
  // along the output row. Written into `into` (a tensor of that shape, e.g. a view of a wider
  // buffer) when given, else into a fresh tensor.
  Value phase_planes(Value& x, const Window& win, int64_t kh, int64_t kw,
                     bool channel_major = false, const Value* into = nullptr) {
    int64_t c = x.shape[1];
    PhasePlanes layout = phase_plane_layout({x.shape[2], x.shape[3]}, win, kh, kw);
    const int64_t* extent = layout.extent;
    // Offsets and sizes of (plane, channel, row, column) in the chosen layout.
    auto at = [&](int64_t p, int64_t ch, int64_t r, int64_t q) -> Shape {
      return channel_major ? Shape{ch, p, r, q} : Shape{p, ch, r, q};
    };
    Value planes = into ? *into : empty_value(x.elem, at(layout.count(), c, extent[0], extent[1]));
    for (int64_t p = 0; p < layout.count(); ++p) {
      const PlaneRegion& region = layout.planes[p];
      const int64_t* first = region.first;
      const int64_t* count = region.count;
      // The padding around the copied rectangle: rows above and below it, then the columns
      // left and right of it.
      const int64_t rows_below = extent[0] - first[0] - count[0];
      const int64_t cols_right = extent[1] - first[1] - count[1];
      fill_region(planes, at(p, 0, 0, 0), at(1, c, first[0], extent[1]));
      fill_region(planes, at(p, 0, first[0] + count[0], 0), at(1, c, rows_below, extent[1]));
      fill_region(planes, at(p, 0, first[0], 0), at(1, c, count[0], first[1]));
      fill_region(planes, at(p, 0, first[0], first[1] + count[1]), at(1, c, count[0], cols_right));
      if (count[0] == 0 || count[1] == 0) continue;
      // A copy of every S-th input pixel, written into its place in the planes (the copy's own
      // buffer becomes a view of theirs): the kernel that computes the input can write it.
      std::string channel = channel_major ? "d0" : "d1", image = channel_major ? "d1" : "d0";
      std::string map =
          "affine_map<(d0, d1, d2, d3) -> (" + image + ", " + channel + ", d2 * " +
          std::to_string(layout.stride[0]) + " + " + std::to_string(region.source[0]) + ", d3 * " +
          std::to_string(layout.stride[1]) + " + " + std::to_string(region.source[1]) + ")>";
      Value copied = gathered(x, map, at(1, c, count[0], count[1]));
      insert_region(planes, copied, at(p, 0, first[0], first[1]));
    }
    return planes;
  }

  // `into` with the region at `offsets` of `sizes` set to `value` (nothing when it is empty).
  void fill_region(Value& into, const Shape& offsets, const Shape& sizes, double value = 0) {
    if (product(sizes) == 0) return;
    std::string zeros = filled(into.elem, sizes, value);
    Value region;
    region.elem = into.elem;
    region.shape = sizes;
    region.ssa = zeros;
    insert_region(into, region, offsets);
  }

  // `into` with `part` written at `offsets`, every `strides`-th element (default: contiguous).
  void insert_region(Value& into, Value& part, const Shape& offsets, Shape strides = {}) {
    if (strides.empty()) strides.assign(part.shape.size(), 1);
    std::string next = fresh();
    line(next + " = tensor.insert_slice " + ssa(part) + " into " + into.ssa + "[" +
         i64_list(offsets) + "] [" + i64_list(part.shape) + "] [" + i64_list(strides) +
         "] : " + part.type() + " into " + into.type());
    into.ssa = next;
  }

  // A tensor of `shape` whose contents are all about to be written (tensor.empty).
  Value empty_value(const std::string& elem, const Shape& shape) {
    Value v;
    v.elem = elem;
    v.shape = shape;
    v.ssa = empty(elem, shape);
    return v;
  }

  // Winograd's F(2x2, 3x3): each 2x2 block of output pixels from a 4x4 block of input in 16
  // products instead of 36, so a 3x3 convolution is 16 matrix products of (F, C) by (C, tiles),
  // 2.25x fewer multiplications than its 9 taps of (F, C) by (C, pixels). The input's 4x4 blocks
  // (overlapping by 2) become V = Bt d B, the weights U = G g Gt (once, at load), each of the 16
  // positions of a block is one product M = U V, and Y = At M A gives the 2x2 outputs.
  //   Bt = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
  //   At = [1 1 1 0; 0 1 -1 -1].
  // For one NCHW float image, a 3x3 kernel, stride and dilation 1, one pixel of padding all
  // round (the output the input's size), rows of blocks long enough to vectorise the transforms
  // along (output rows of 14 or more: 7-wide ones made resnet18 20.9 -> 25.0 ms), and enough
  // channels for the products to dominate the transforms (16 -> 64 at 55x55 ran 0.38 -> 0.79 ms,
  // 64 -> 64 at 56x56 1.18 -> 0.85 ms).
  static constexpr int64_t kMinWinogradRow = 14;
  static constexpr int64_t kMinWinogradChannels = 64;
  bool winograd_applies(const Value& x, const Value& w, const Window& win, int64_t group) {
    if (x.shape.size() != 4 || x.shape[0] != 1 || x.elem != "f32" || group != 1) return false;
    if (w.shape.size() != 4 || w.shape[2] != 3 || w.shape[3] != 3) return false;
    for (int k = 0; k < 2; ++k)
      if (win.strides[k] != 1 || win.dilations[k] != 1 || win.low[k] != 1 || win.high[k] != 1)
        return false;
    return win.out[1] >= kMinWinogradRow && x.shape[1] >= kMinWinogradChannels &&
           w.shape[0] >= kMinWinogradChannels;
  }

  // The coefficients of sum_{k,l} a[k] * b[l] * value[k * N + l], in that order.
  template <size_t N>
  static std::vector<double> outer(const double (&a)[N], const double (&b)[N]) {
    std::vector<double> coefficients;
    for (size_t k = 0; k < N; ++k)
      for (size_t l = 0; l < N; ++l) coefficients.push_back(a[k] * b[l]);
    return coefficients;
  }

  // sum_k coefficient_k * value_k as elementwise kernels (a coefficient of 0 leaves its term out).
  Value combination(const std::vector<double>& coefficients, std::vector<Value>& values) {
    Value sum;
    bool first = true;
    for (size_t k = 0; k < values.size(); ++k) {
      double a = coefficients[k];
      if (a == 0) continue;
      Value term = values[k];
      if (std::abs(a) != 1 || (first && a < 0))
        term = binary("Mul", term, make_const_floats(term.elem, {}, {first ? a : std::abs(a)}));
      sum = first ? term : binary(a > 0 ? "Add" : "Sub", sum, term);
      first = false;
    }
    return sum;
  }

  // With fewer blocks than filters (resnet18's 14-wide stage: 49 blocks, 256 filters) the
  // products run as (blocks, C) by (C, F): a 32-wide register tile along 49 blocks computes 64
  // columns, 15 of them wasted, where along 256 filters every tile is full (`bench/matmul_shapes.py
  // 16x256x256x49 16x49x256x256`: 2.05 against 0.83 ms). The transforms then run channels-last,
  // along C and F.
  static bool winograd_channels_last(int64_t blocks, int64_t filters) { return blocks < filters; }

  Value winograd_conv(Value& x, Value& w, const Window& win) {
    static const double bt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
    static const double at[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
    int64_t c = x.shape[1], f = w.shape[0], oh = win.out[0], ow = win.out[1];
    // An odd side has a last block row (or column) half outside the output: computed, not kept.
    int64_t th = (oh + 1) / 2, tw = (ow + 1) / 2;
    bool channels_last = winograd_channels_last(th * tw, f);
    // Input block (r, q) covers padded rows 2r..2r+3 and columns 2q..2q+3: over the padded input's
    // phase planes, its pixel (k, l) is plane (k % 2, l % 2) at (r + k / 2, q + l / 2), so every
    // transform reads unit-stride rows.
    Window blocks = win;
    blocks.strides = {2, 2};
    blocks.out = {th, tw};
    Value planes = phase_planes(x, blocks, 4, 4);
    if (channels_last) planes = transpose_copy(planes, {0, 2, 3, 1});
    // Dimensions of a (position, C or F, block row, block column) tensor in the chosen layout.
    auto layout = [&](int64_t p, int64_t ch, int64_t r, int64_t q) -> Shape {
      return channels_last ? Shape{p, r, q, ch} : Shape{p, ch, r, q};
    };
    std::vector<Value> pixels;
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t l = 0; l < 4; ++l)
        pixels.push_back(slice(planes, layout((k % 2) * 2 + l % 2, 0, k / 2, l / 2),
                               layout(1, c, th, tw), {1, 1, 1, 1}));
    Value v = empty_value(x.elem, layout(16, c, th, tw));
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        Value position = combination(outer(bt[i], bt[j]), pixels);
        insert_region(v, position, {i * 4 + j, 0, 0, 0});
      }
    Value v_flat = reshape(v, channels_last ? Shape{16, th * tw, c} : Shape{16, c, th * tw});
    Value u = winograd_weights(w, channels_last);
    Value m;
    m.elem = x.elem;
    m.shape = channels_last ? Shape{16, th * tw, f} : Shape{16, f, th * tw};
    std::string acc = filled(x.elem, m.shape, 0);
    Value lhs = channels_last ? v_flat : u, rhs = channels_last ? u : v_flat;
    m.ssa = fresh();
    line(m.ssa + " = linalg.batch_matmul ins(" + ssa(lhs) + ", " + ssa(rhs) + " : " + lhs.type() +
         ", " + rhs.type() + ") outs(" + acc + " : " + m.type() + ") -> " + m.type());
    Value m_blocks = reshape(m, layout(16, f, th, tw));
    std::vector<Value> positions;
    for (int64_t p = 0; p < 16; ++p)
      positions.push_back(slice(m_blocks, {p, 0, 0, 0}, layout(1, f, th, tw), {1, 1, 1, 1}));
    // Output pixel (a, b) of every block: every other row and column of the result.
    Value y = empty_value(x.elem, layout(1, f, oh, ow));
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        Value part = combination(outer(at[a], at[b]), positions);
        Shape kept = layout(1, f, (oh - a + 1) / 2, (ow - b + 1) / 2);
        if (kept != part.shape) part = slice(part, {0, 0, 0, 0}, kept, {1, 1, 1, 1});
        insert_region(y, part, layout(0, 0, a, b), layout(1, 1, 2, 2));
      }
    return channels_last ? transpose(y, {0, 3, 1, 2}) : y;
  }

  // The weights (F, C, 3, 3) as U = G g Gt per (f, c): (16, F, C), position i * 4 + j, or
  // (16, C, F) `transposed`. Constant weights are transformed here; bound ones once, when the
  // program is loaded (kiln_prepare).
  Value winograd_weights(Value& w, bool transposed) {
    static const double g[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    int64_t f = w.shape[0], c = w.shape[1];
    if (w.is_const) {
      std::vector<double> u(16 * f * c);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          std::vector<double> coefficients = outer(g[i], g[j]);
          for (int64_t o = 0; o < f * c; ++o) {
            double sum = 0;
            for (int q = 0; q < 9; ++q) sum += coefficients[q] * w.f[o * 9 + q];
            int64_t place = transposed ? (o % c) * f + o / c : o;
            u[(i * 4 + j) * f * c + place] = sum;
          }
        }
      return make_const_floats(w.elem, transposed ? Shape{16, c, f} : Shape{16, f, c},
                               std::move(u));
    }
    auto transform = [&] {
      std::vector<Value> taps;
      for (int64_t k = 0; k < 3; ++k)
        for (int64_t l = 0; l < 3; ++l) {
          Value tap = slice(w, {0, 0, k, l}, {f, c, 1, 1}, {1, 1, 1, 1});
          taps.push_back(reshape(tap, {1, f, c}));
        }
      Value u = empty_value(w.elem, {16, f, c});
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          Value position = combination(outer(g[i], g[j]), taps);
          insert_region(u, position, {i * 4 + j, 0, 0});
        }
      return transposed ? transpose_copy(u, {0, 2, 1}) : u;
    };
    if (bound_weight_ssa_.count(w.ssa) == 0) return transform();
    return prepared_at_load(w.ssa + (transposed ? " winograd transposed" : " winograd"), transform);
  }

  // Computing over the padded width costs (padded width / output width) more products; above
  // this the gathered columns of conv_as_matmul are cheaper.
  static constexpr double kMaxShiftedWidthOverhead = 1.15;

  // The bottom rows conv_as_shifted_matmuls needs padded on beyond the convolution's own, or -1
  // where it does not apply: one image, 2-D, float, one group, stride 1, a kernel wider than a
  // pixel, and output rows wide enough that the padded width adds little work.
  int64_t shifted_tap_extra_rows(const Value& x, const Value& w, const Window& win, int64_t group) {
    if (x.shape.size() != 4 || x.shape[0] != 1 || group != 1 || !is_float_type(x.elem)) return -1;
    for (int64_t d : x.shape)
      if (d <= 0) return -1;
    if (win.strides[0] != 1 || win.strides[1] != 1 || w.shape[2] * w.shape[3] == 1) return -1;
    int64_t hp = x.shape[2] + win.low[0] + win.high[0];
    int64_t wp = x.shape[3] + win.low[1] + win.high[1];
    int64_t oh = win.out[0], ow = win.out[1];
    if (ow <= 0 || oh <= 0 || double(wp) > kMaxShiftedWidthOverhead * double(ow)) return -1;
    // The last tap reads `columns` values from its offset on.
    int64_t last_offset =
        (w.shape[2] - 1) * win.dilations[0] * wp + (w.shape[3] - 1) * win.dilations[1];
    int64_t needed = last_offset + oh * wp - hp * wp;
    return needed > 0 ? (needed + wp - 1) / wp : 0;
  }

  // A stride-1 2-D convolution of one image as one matrix product per kernel tap, accumulated:
  // with the padded input flattened to (C, HP*WP), tap (i, j) multiplies its weights (F, C) by
  // the input shifted by i*WP + j, a view of (C, OH*WP) — no gathered copy of the windows. Each
  // product computes whole padded rows (WP wide): the last WP-OW columns of each output row wrap
  // into the next row and are dropped by the view that is returned. The input's padding must reach
  // the last tap's last read (shifted_tap_extra_rows).
  Value conv_as_shifted_matmuls(Value& padded, Value& w, const Shape& dilations,
                                const Shape& out_spatial) {
    int64_t c = padded.shape[1], hp = padded.shape[2], wp = padded.shape[3];
    int64_t f = w.shape[0], kh = w.shape[2], kw = w.shape[3];
    int64_t oh = out_spatial[0], ow = out_spatial[1], columns = oh * wp;
    std::string elem = padded.elem;
    Value flat = reshape(padded, {c, hp * wp});
    Value taps = prepared_weights(w, {2, 3, 0, 1}, {kh * kw, f, c});
    std::string taps_ssa = ssa(taps), flat_ssa = ssa(flat);
    std::string tap_type = tensor_type(elem, {f, c}), view_type = tensor_type(elem, {c, columns});
    std::string out_type = tensor_type(elem, {f, columns});
    std::string acc = filled(elem, {f, columns}, 0);
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        int64_t offset = i * dilations[0] * wp + j * dilations[1];
        std::string tap = fresh(), view = fresh(), sum = fresh();
        line(tap + " = tensor.extract_slice " + taps_ssa + "[" + std::to_string(i * kw + j) +
             ", 0, 0] [1, " + std::to_string(f) + ", " + std::to_string(c) +
             "] [1, 1, 1] : " + taps.type() + " to " + tap_type);
        line(view + " = tensor.extract_slice " + flat_ssa + "[0, " + std::to_string(offset) +
             "] [" + std::to_string(c) + ", " + std::to_string(columns) +
             "] [1, 1] : " + flat.type() + " to " + view_type);
        line(sum + " = linalg.matmul ins(" + tap + ", " + view + " : " + tap_type + ", " +
             view_type + ") outs(" + acc + " : " + out_type + ") -> " + out_type);
        acc = sum;
      }
    Value wide;
    wide.elem = elem;
    wide.shape = {f, columns};
    wide.ssa = acc;
    Value rows = reshape(wide, {1, f, oh, wp});
    return slice(rows, {0, 0, 0, 0}, {1, f, oh, ow}, {1, 1, 1, 1});
  }

  Value add_channel_bias(Value& y, Value& bias) {
    Shape per_channel(y.shape.size() - 1, 1);
    per_channel[0] = y.shape[1];
    Value b = reshape(bias, per_channel);
    return binary("Add", y, b);
  }

  // A convolution of an already padded input (N, C, spatial...) with weights (F, C/group, k...).
  // 2-D (and 1-D as 2-D) use linalg's named convolutions, which kiln's fast paths know; other
  // ranks a generic whose maps index the window directly.
  Value conv_core(Value& padded, Value& w, const Shape& strides, const Shape& dilations,
                  int64_t group, const Shape& out_spatial) {
    size_t spatial = padded.shape.size() - 2;
    int64_t n = padded.shape[0], c = padded.shape[1], f = w.shape[0];
    std::string elem = padded.elem;
    if (spatial == 1) {
      Value x2 = reshape(padded, {n, c, 1, padded.shape[2]});
      Value w2 = reshape(w, {f, w.shape[1], 1, w.shape[2]});
      Value y2 = conv_core(x2, w2, {1, strides[0]}, {1, dilations[0]}, group, {1, out_spatial[0]});
      return reshape(y2, {n, f, out_spatial[0]});
    }
    Shape out_shape = {n, f};
    out_shape.insert(out_shape.end(), out_spatial.begin(), out_spatial.end());
    if (spatial == 2) {
      std::string attrs = "{dilations = dense<[" + i64_list(dilations) +
                          "]> : tensor<2xi64>, strides = dense<[" + i64_list(strides) +
                          "]> : tensor<2xi64>}";
      if (group == 1 && is_float_type(elem))
        return conv_as_matmul(padded, w, strides, dilations, out_spatial);
      if (group == 1) return conv_op("linalg.conv_2d_nchw_fchw", attrs, padded, w, out_shape, elem);
      if (group == c && f == c && is_float_type(elem)) {
        if (strides[0] == 1 && strides[1] == 1 && out_spatial[1] >= kMinRowForTaps)
          return depthwise_taps(padded, w, dilations, out_spatial);
        return out_spatial[1] >= kMinRowForDepthwise
                   ? depthwise_rows(padded, w, strides, dilations, out_spatial)
                   : depthwise_channels_last(padded, w, strides, dilations, out_spatial);
      }
      if (group == c && f == c) {
        Value wd = reshape(w, {c, w.shape[2], w.shape[3]});
        return conv_op("linalg.depthwise_conv_2d_nchw_chw", attrs, padded, wd, out_shape, elem);
      }
      Value xg = reshape(padded, {n, group, c / group, padded.shape[2], padded.shape[3]});
      Value wg = reshape(w, {group, f / group, c / group, w.shape[2], w.shape[3]});
      Value yg = conv_op("linalg.conv_2d_ngchw_gfchw", attrs, xg, wg,
                         {n, group, f / group, out_spatial[0], out_spatial[1]}, elem);
      return reshape(yg, out_shape);
    }
    // Loops: n, g, f, o_1..o_s (parallel), c, k_1..k_s (reduction).
    size_t loops = 4 + 2 * spatial;
    auto d = [](size_t k) { return "d" + std::to_string(k); };
    Shape xs = {n, group, c / group}, ws = {group, f / group, c / group},
          ys = {n, group, f / group};
    xs.insert(xs.end(), padded.shape.begin() + 2, padded.shape.end());
    ws.insert(ws.end(), w.shape.begin() + 2, w.shape.end());
    ys.insert(ys.end(), out_spatial.begin(), out_spatial.end());
    Value xg = reshape(padded, xs), wg = reshape(w, ws);
    std::string head = "affine_map<(" + dims_list(loops) + ") -> (";
    std::string c_dim = d(3 + spatial);
    std::string xmap = head + d(0) + ", " + d(1) + ", " + c_dim;
    std::string wmap = head + d(1) + ", " + d(2) + ", " + c_dim;
    std::string ymap = head + d(0) + ", " + d(1) + ", " + d(2);
    for (size_t k = 0; k < spatial; ++k) {
      std::string o = d(3 + k), kk = d(4 + spatial + k);
      xmap += ", " + o + " * " + std::to_string(strides[k]) + " + " + kk + " * " +
              std::to_string(dilations[k]);
      wmap += ", " + kk;
      ymap += ", " + o;
    }
    xmap += ")>";
    wmap += ")>";
    ymap += ")>";
    std::vector<bool> reduction(loops, false);
    for (size_t k = 3 + spatial; k < loops; ++k) reduction[k] = true;
    Value yg;
    yg.elem = elem;
    yg.shape = ys;
    std::string acc = filled(elem, ys, 0);
    yg.ssa = fresh();
    line(yg.ssa + " = linalg.generic {indexing_maps = [" + xmap + ", " + wmap + ", " + ymap +
         "], iterator_types = " + iterators(reduction) + "} ins(" + ssa(xg) + ", " + ssa(wg) +
         " : " + xg.type() + ", " + wg.type() + ") outs(" + acc + " : " + yg.type() + ") {");
    std::string a = "%b" + std::to_string(next_id_++), b = "%b" + std::to_string(next_id_++),
                o = "%b" + std::to_string(next_id_++);
    line("^bb0(" + a + ": " + elem + ", " + b + ": " + elem + ", " + o + ": " + elem + "):");
    bool fl = is_float_type(elem);
    std::string prod = op(fl ? "arith.mulf" : "arith.muli", {a, b}, elem);
    std::string sum = op(fl ? "arith.addf" : "arith.addi", {o, prod}, elem);
    line("  linalg.yield " + sum + " : " + elem);
    line("} -> " + yg.type());
    return reshape(yg, out_shape);
  }

  // A 2-D convolution as one matrix product, which kiln's tiled and vectorised contraction path
  // compiles well: the weights as they are, (F, C*KH*KW), times the input's windows gathered into
  // columns, (C*KH*KW, N*OH*OW). The product is (F, N*OH*OW): NCHW already for a batch of one,
  // and neither the weights nor the result need a transposed copy.
  Value conv_as_matmul(Value& padded, Value& w, const Shape& strides, const Shape& dilations,
                       const Shape& out_spatial) {
    int64_t n = padded.shape[0], c = padded.shape[1], f = w.shape[0];
    int64_t kh = w.shape[2], kw = w.shape[3], oh = out_spatial[0], ow = out_spatial[1];
    if (n * oh * ow < f)
      return conv_as_transposed_matmul(padded, w, strides, dilations, out_spatial);
    // A pointwise convolution of one image already has its columns: the input itself, (C, H*W).
    bool pointwise = kh == 1 && kw == 1 && strides[0] == 1 && strides[1] == 1 && n == 1 &&
                     padded.shape[2] == oh && padded.shape[3] == ow;
    Value cols = pointwise
                     ? reshape(padded, {c, oh * ow})
                     : reshape(gather_windows(padded, kh, kw, strides, dilations, out_spatial),
                               {c * kh * kw, n * oh * ow});
    Value wf = reshape(w, {f, c * kh * kw});
    Value y = matmul(wf, cols);
    if (n == 1) return reshape(y, {1, f, oh, ow});
    Value y4 = reshape(y, {f, n, oh, ow});
    return transpose(y4, {1, 0, 2, 3});
  }

  // A new `elem` tensor of `shape` and the opening line of the all-parallel generic that fills it
  // from `input` read at `map`; the caller writes the body and closes it.
  Value open_one_input_generic(Value& input, const std::string& map, const std::string& elem,
                               const Shape& shape) {
    Value out;
    out.elem = elem;
    out.shape = shape;
    std::string init = empty(elem, shape);
    out.ssa = fresh();
    line(out.ssa + " = linalg.generic {indexing_maps = [" + map + ", " +
         broadcast_map(shape, shape) +
         "], iterator_types = " + iterators(std::vector<bool>(shape.size(), false)) + "} ins(" +
         ssa(input) + " : " + input.type() + ") outs(" + init + " : " + out.type() + ") {");
    return out;
  }

  // A copy of `input`'s elements into a new tensor of `shape`, element (d0..d5) read at `map`.
  Value gathered(Value& input, const std::string& map, const Shape& shape) {
    std::string elem = input.elem;
    Value out = open_one_input_generic(input, map, elem, shape);
    std::string a = "%b" + std::to_string(next_id_++), b = "%b" + std::to_string(next_id_++);
    line("^bb0(" + a + ": " + elem + ", " + b + ": " + elem + "):");
    line("  linalg.yield " + a + " : " + elem);
    line("} -> " + out.type());
    return out;
  }

  // The input's KHxKW windows as columns, (C, KH, KW, N, OH, OW): one column per output pixel.
  Value gather_windows(Value& padded, int64_t kh, int64_t kw, const Shape& strides,
                       const Shape& dilations, const Shape& out_spatial) {
    int64_t n = padded.shape[0], c = padded.shape[1], oh = out_spatial[0], ow = out_spatial[1];
    // Loop positions of n, oh, ow, c, kh, kw.
    const std::vector<int> at = {3, 4, 5, 0, 1, 2};
    auto d = [&](int role) { return "d" + std::to_string(at[role]); };
    Shape shape(6);
    const int64_t sizes[6] = {n, oh, ow, c, kh, kw};
    for (int role = 0; role < 6; ++role) shape[at[role]] = sizes[role];
    std::string map = "affine_map<(d0, d1, d2, d3, d4, d5) -> (" + d(0) + ", " + d(3) + ", " +
                      d(1) + " * " + std::to_string(strides[0]) + " + " + d(4) + " * " +
                      std::to_string(dilations[0]) + ", " + d(2) + " * " +
                      std::to_string(strides[1]) + " + " + d(5) + " * " +
                      std::to_string(dilations[1]) + ")>";
    return gathered(padded, map, shape);
  }

  // The input's KHxKW windows as rows, (N, OH, OW, KH, KW, C): the input is made channels-last
  // first (one pass over it), so each tap of each output pixel copies C contiguous values. (Taken
  // from NCHW directly, the 3-long tap loop was innermost and the copy ran at a fifth of the
  // speed.)
  Value gather_windows_channels_last(Value& padded, int64_t kh, int64_t kw, const Shape& strides,
                                     const Shape& dilations, const Shape& out_spatial) {
    int64_t n = padded.shape[0], c = padded.shape[1], oh = out_spatial[0], ow = out_spatial[1];
    Value nhwc = transpose(padded, {0, 2, 3, 1});
    Shape shape = {n, oh, ow, kh, kw, c};
    // Loops n, oh, ow, kh, kw, c.
    std::string map = "affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 * " +
                      std::to_string(strides[0]) + " + d3 * " + std::to_string(dilations[0]) +
                      ", d2 * " + std::to_string(strides[1]) + " + d4 * " +
                      std::to_string(dilations[1]) + ", d5)>";
    return gathered(nhwc, map, shape);
  }

  // conv_as_matmul for deep layers, where the output has fewer pixels than there are filters: a
  // product with few columns runs far below the matmul kernel's speed (512x4608 by 4608x49:
  // 5.8 ms; the transposed 49x4608 by 4608x512: 1.6 ms). These compute the transposed product:
  // the windows gathered into rows, (N*OH*OW, C*KH*KW), times the transposed weights, then the
  // (small) result transposed back to NCHW. The weights' transposed copy costs less than it saves.
  Value conv_as_transposed_matmul(Value& padded, Value& w, const Shape& strides,
                                  const Shape& dilations, const Shape& out_spatial) {
    int64_t n = padded.shape[0], c = padded.shape[1], f = w.shape[0];
    int64_t kh = w.shape[2], kw = w.shape[3], oh = out_spatial[0], ow = out_spatial[1];
    // A pointwise convolution's rows are the input itself, channels-last.
    bool pointwise = kh == 1 && kw == 1 && strides[0] == 1 && strides[1] == 1 &&
                     padded.shape[2] == oh && padded.shape[3] == ow;
    Value rows =
        pointwise
            ? reshape(transpose(padded, {0, 2, 3, 1}), {n * oh * ow, c})
            : reshape(gather_windows_channels_last(padded, kh, kw, strides, dilations, out_spatial),
                      {n * oh * ow, kh * kw * c});
    Value wt = prepared_weights(w, {2, 3, 1, 0}, {kh * kw * c, f});
    Value y = matmul(rows, wt);
    Value y4 = reshape(y, {n, oh, ow, f});
    return transpose(y4, {0, 3, 1, 2});
  }

  // `w` as (F, K) transposed to (K, F); see prepared_weights.
  Value transposed_weights(Value& w, int64_t f, int64_t k) {
    Value wf = w.shape == Shape{f, k} ? w : reshape(w, {f, k});
    return prepared_weights(wf, {1, 0}, {k, f});
  }

  // `w` transposed by `perm`, then reshaped to `shape`. A bound weight is re-laid-out once, when
  // the program is loaded (in kiln_prepare), never per run; other values here and now.
  Value prepared_weights(Value& w, const std::vector<int64_t>& perm, const Shape& shape) {
    if (w.is_const || bound_weight_ssa_.count(w.ssa) == 0) {
      Value wt = transpose(w, perm);
      return reshape(wt, shape);
    }
    return prepared_at_load(w.ssa + " " + i64_list(perm) + " " + i64_list(shape), [&] {
      Value source = w;
      Value transposed = transpose(source, perm);
      return reshape(transposed, shape);
    });
  }

  // What `compute` builds from bound weights, computed once when the program is loaded (its ops
  // emitted into kiln_prepare instead of main) and passed to main as an argument. `key` names the
  // preparation, so a weight prepared the same way twice is prepared once.
  template <typename Compute>
  Value prepared_at_load(const std::string& key, Compute compute) {
    auto known = prepared_by_source_.find(key);
    if (known != prepared_by_source_.end()) return prepared_[known->second];
    std::swap(body_, prepare_body_);
    Value computed = compute();
    std::string result = ssa(computed);
    std::swap(body_, prepare_body_);
    Value argument;
    argument.elem = computed.elem;
    argument.shape = computed.shape;
    argument.ssa = "%prepared" + std::to_string(prepared_.size());
    prepared_by_source_[key] = prepared_.size();
    prepared_.push_back(argument);
    prepared_results_.push_back(result);
    return argument;
  }

  // The input map of a windowed kernel (window_generic) over loops d0..d5: (n, c, oh, kh, kw,
  // ow) reading NCHW, or channels-last (n, oh, ow, kh, kw, c) reading NHWC.
  static std::string window_input_map(const Shape& strides, const Shape& dilations,
                                      bool channels_last) {
    auto along = [&](const char* out, const char* tap, size_t k) {
      return std::string(out) + " * " + std::to_string(strides[k]) + " + " + tap + " * " +
             std::to_string(dilations[k]);
    };
    std::string rows = along(channels_last ? "d1" : "d2", "d3", 0);
    std::string cols = along(channels_last ? "d2" : "d5", "d4", 1);
    std::string dims =
        channels_last ? "d0, " + rows + ", " + cols + ", d5" : "d0, d1, " + rows + ", " + cols;
    return "affine_map<(d0, d1, d2, d3, d4, d5) -> (" + dims + ")>";
  }

  // A windowed kernel as one generic over loops d0..d5: three parallel, the two window taps
  // (reduction), one parallel. `update(input, weight, acc)` gives the new accumulator, which
  // starts at `init`.
  using WindowUpdate =
      std::function<std::string(const std::string&, const std::string&, const std::string&)>;
  Value window_generic(Value& x, const std::string& w_ssa, const std::string& w_type,
                       const std::string& xmap, const std::string& wmap, const std::string& ymap,
                       const Shape& out, double init, const WindowUpdate& update) {
    std::string elem = x.elem;
    Value y;
    y.elem = elem;
    y.shape = out;
    std::string acc = filled(elem, out, init);
    y.ssa = fresh();
    line(y.ssa + " = linalg.generic {indexing_maps = [" + xmap + ", " + wmap + ", " + ymap +
         "], iterator_types = [\"parallel\", \"parallel\", \"parallel\", \"reduction\", "
         "\"reduction\", \"parallel\"]} ins(" +
         ssa(x) + ", " + w_ssa + " : " + x.type() + ", " + w_type + ") outs(" + acc + " : " +
         y.type() + ") {");
    std::string a = "%b" + std::to_string(next_id_++), b = "%b" + std::to_string(next_id_++),
                o = "%b" + std::to_string(next_id_++);
    line("^bb0(" + a + ": " + elem + ", " + b + ": " + elem + ", " + o + ": " + elem + "):");
    line("  linalg.yield " + update(a, b, o) + " : " + elem);
    line("} -> " + y.type());
    return y;
  }

  // acc + input * weight.
  WindowUpdate multiply_add(const std::string& elem) {
    return [this, elem](const std::string& a, const std::string& b, const std::string& o) {
      return op("arith.addf", {o, op("arith.mulf", {a, b}, elem)}, elem);
    };
  }

  // Output rows at least this wide vectorise well along the row (depthwise_rows); narrower ones
  // (deep layers: 14 or 7 pixels, hundreds of channels) go channels-last.
  static constexpr int64_t kMinRowForDepthwise = 28;

  // A depthwise 2-D convolution in NCHW with the output column loop innermost: each kernel tap is
  // one pass along a row of the input and of the output, contiguous for stride 1, which LLVM
  // vectorises. (Channels-last with the channel loop innermost vectorises as well, but the two
  // transposes around it cost more than the convolution.)
  // Rows shorter than this leave a vector of 8 mostly mask: such convolutions go channels-last.
  static constexpr int64_t kMinRowForTaps = 8;

  // A stride-1 depthwise convolution as one elementwise kernel over the output: the sum over the
  // KHxKW taps of the input shifted by the tap (a view of the padded input, no copy) times the
  // tap's per-channel weight. Elementwise fusion merges the taps, and the bias and activation
  // that follow, into one kernel, which kiln vectorises along the rows: each output row is
  // computed in registers from KH*KW shifted input rows. (As a generic with the taps as
  // reduction loops it ran as scalar loops.)
  Value depthwise_taps(Value& padded, Value& w, const Shape& dilations, const Shape& out_spatial) {
    int64_t n = padded.shape[0], c = padded.shape[1], kh = w.shape[2], kw = w.shape[3];
    int64_t oh = out_spatial[0], ow = out_spatial[1];
    // The weights as one (1, C, 1, 1) block per tap, laid out once: each tap's weights are then a
    // view that broadcasts over the output as it is (a reshape of a view would not vectorise).
    Value per_tap = prepared_weights(w, {2, 3, 0, 1}, {kh * kw, c, 1, 1});
    Value sum;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        Value shifted =
            slice(padded, {0, 0, i * dilations[0], j * dilations[1]}, {n, c, oh, ow}, {1, 1, 1, 1});
        Value tap = slice(per_tap, {i * kw + j, 0, 0, 0}, {1, c, 1, 1}, {1, 1, 1, 1});
        Value term = binary("Mul", shifted, tap);
        sum = (i == 0 && j == 0) ? term : binary("Add", sum, term);
      }
    return sum;
  }

  Value depthwise_rows(Value& padded, Value& w, const Shape& strides, const Shape& dilations,
                       const Shape& out_spatial) {
    int64_t n = padded.shape[0], c = padded.shape[1], kh = w.shape[2], kw = w.shape[3];
    std::string elem = padded.elem;
    Value wd = reshape(w, {c, kh, kw});
    Shape out = {n, c, out_spatial[0], out_spatial[1]};
    // Loops n, c, oh, kh, kw, ow.
    std::string head = "affine_map<(d0, d1, d2, d3, d4, d5) -> (";
    std::string xmap = window_input_map(strides, dilations, false);
    std::string wmap = head + "d1, d3, d4)>", ymap = head + "d0, d1, d2, d5)>";
    return window_generic(padded, ssa(wd), wd.type(), xmap, wmap, ymap, out, 0, multiply_add(elem));
  }

  // A depthwise 2-D convolution computed channels-last with the channel loop innermost, so each
  // kernel tap is one contiguous, vectorisable pass over the channels.
  Value depthwise_channels_last(Value& padded, Value& w, const Shape& strides,
                                const Shape& dilations, const Shape& out_spatial) {
    int64_t n = padded.shape[0], c = padded.shape[1], kh = w.shape[2], kw = w.shape[3];
    std::string elem = padded.elem;
    Value xl = transpose(padded, {0, 2, 3, 1});
    Value wl = prepared_weights(w, {2, 3, 1, 0}, {kh, kw, c});
    Shape out = {n, out_spatial[0], out_spatial[1], c};
    // Loops n, oh, ow, kh, kw, c.
    std::string head = "affine_map<(d0, d1, d2, d3, d4, d5) -> (";
    std::string xmap = window_input_map(strides, dilations, true);
    std::string wmap = head + "d3, d4, d5)>", ymap = head + "d0, d1, d2, d5)>";
    Value y = window_generic(xl, ssa(wl), wl.type(), xmap, wmap, ymap, out, 0, multiply_add(elem));
    return transpose(y, {0, 3, 1, 2});
  }

  // ConvTranspose as a convolution: the input spread out by the strides (zeros between), padded
  // by the kernel's extent less the pads, convolved with the kernel flipped and its channel
  // dimensions swapped (per group).
  Value conv_transpose() {
    Value x = input(0), w = input(1);
    size_t spatial = x.shape.size() - 2;
    if (x.shape.size() < 3 || spatial > 3 || w.shape.size() != x.shape.size())
      fail(where_ + ": only 1-D, 2-D and 3-D transposed convolutions are supported");
    int64_t n = x.shape[0], c = x.shape[1];
    int64_t group = attr_int("group", 1);
    if (group < 1 || c % group || w.shape[0] != c)
      fail(where_ + ": channels do not match the weights and groups");
    int64_t cg = c / group, fg = w.shape[1], f = fg * group;
    Shape kernel(w.shape.begin() + 2, w.shape.end());
    if (auto ks = attr_ints("kernel_shape")) kernel = *ks;
    Shape strides = attr_ints("strides").value_or(Shape(spatial, 1));
    Shape dilations = attr_ints("dilations").value_or(Shape(spatial, 1));
    Shape pads = attr_ints("pads").value_or(Shape(2 * spatial, 0));
    Shape output_padding = attr_ints("output_padding").value_or(Shape(spatial, 0));
    if (kernel.size() != spatial || strides.size() != spatial || dilations.size() != spatial ||
        pads.size() != 2 * spatial || output_padding.size() != spatial)
      fail(where_ +
           ": kernel_shape, strides, dilations, pads or output_padding do not match the "
           "input's rank");
    std::string auto_pad = attr_string("auto_pad", "NOTSET");
    std::optional<Shape> output_shape = attr_ints("output_shape");
    if (output_shape && output_shape->size() == spatial + 2)
      output_shape = Shape(output_shape->begin() + 2, output_shape->end());
    if (output_shape && output_shape->size() != spatial)
      fail(where_ + ": output_shape does not match the input's rank");
    Shape in(x.shape.begin() + 2, x.shape.end());
    for (size_t k = 0; k < spatial; ++k) {
      if (strides[k] < 1 || dilations[k] < 1 || kernel[k] < 1)
        fail(where_ + ": strides, dilations and kernel sizes must be positive");
      int64_t extent = (kernel[k] - 1) * dilations[k] + 1;
      int64_t full = strides[k] * (in[k] - 1) + output_padding[k] + extent;
      std::optional<int64_t> target;
      if (output_shape) target = (*output_shape)[k];
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") target = in[k] * strides[k];
      if (target) {
        int64_t total = full - *target;  // negative: the output grows at the end
        bool upper = auto_pad == "SAME_UPPER";
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor, as ONNX's Python
        pads[k] = upper ? half : total - half;
        pads[k + spatial] = total - pads[k];
      } else if (auto_pad == "VALID") {
        pads[k] = pads[k + spatial] = 0;
      }
    }
    // Spread: (in - 1) * stride + 1, the inputs at multiples of the stride.
    Value spread = x;
    bool strided = false;
    for (int64_t s : strides) strided |= s > 1;
    if (strided) {
      Shape shape = {n, c};
      for (size_t k = 0; k < spatial; ++k) shape.push_back((in[k] - 1) * strides[k] + 1);
      std::string zeros = filled(x.elem, shape, 0);
      Value out;
      out.elem = x.elem;
      out.shape = shape;
      out.ssa = fresh();
      std::string offsets = "0, 0", sizes = std::to_string(n) + ", " + std::to_string(c),
                  steps = "1, 1";
      for (size_t k = 0; k < spatial; ++k) {
        offsets += ", 0";
        sizes += ", " + std::to_string(in[k]);
        steps += ", " + std::to_string(strides[k]);
      }
      line(out.ssa + " = tensor.insert_slice " + ssa(x) + " into " + zeros + "[" + offsets + "] [" +
           sizes + "] [" + steps + "] : " + x.type() + " into " + out.type());
      spread = out;
    }
    // Pad by extent - 1 - pad at each end (plus output_padding at the end); a negative amount
    // crops instead.
    Shape low = {0, 0}, high = {0, 0}, crop_low = {0, 0}, crop_high = {0, 0};
    for (size_t k = 0; k < spatial; ++k) {
      int64_t reach = (kernel[k] - 1) * dilations[k];
      int64_t lo = reach - pads[k], hi = reach - pads[k + spatial] + output_padding[k];
      low.push_back(std::max<int64_t>(lo, 0));
      high.push_back(std::max<int64_t>(hi, 0));
      crop_low.push_back(std::max<int64_t>(-lo, 0));
      crop_high.push_back(std::max<int64_t>(-hi, 0));
    }
    Value padded = pad(spread, low, high, 0);
    Shape offsets(spatial + 2, 0), sizes = padded.shape, steps(spatial + 2, 1);
    bool crop = false;
    for (size_t k = 2; k < spatial + 2; ++k) {
      offsets[k] = crop_low[k];
      sizes[k] -= crop_low[k] + crop_high[k];
      crop |= crop_low[k] || crop_high[k];
      if (sizes[k] < (kernel[k - 2] - 1) * dilations[k - 2] + 1)
        fail(where_ + ": the pads leave no output");
    }
    if (crop) padded = slice(padded, offsets, sizes, steps);
    // Weights (C = G*Cg, Fg, k...) -> (F = G*Fg, Cg, k...), each kernel flipped.
    Shape w5 = {group, cg, fg}, wt5 = {group, fg, cg};
    w5.insert(w5.end(), kernel.begin(), kernel.end());
    wt5.insert(wt5.end(), kernel.begin(), kernel.end());
    Value wg = reshape(w, w5);
    size_t loops = 3 + spatial;
    std::string src = "affine_map<(" + dims_list(loops) + ") -> (d0, d2, d1";
    for (size_t k = 0; k < spatial; ++k)
      src += ", " + std::to_string(kernel[k] - 1) + " - d" + std::to_string(3 + k);
    src += ")>";
    Value flipped;
    flipped.elem = w.elem;
    flipped.shape = wt5;
    std::string init = empty(w.elem, wt5);
    flipped.ssa = fresh();
    line(flipped.ssa + " = linalg.generic {indexing_maps = [" + src + ", " +
         broadcast_map(wt5, wt5) +
         "], iterator_types = " + iterators(std::vector<bool>(loops, false)) + "} ins(" + ssa(wg) +
         " : " + wg.type() + ") outs(" + init + " : " + flipped.type() + ") {");
    std::string a = "%b" + std::to_string(next_id_++), b = "%b" + std::to_string(next_id_++);
    line("^bb0(" + a + ": " + w.elem + ", " + b + ": " + w.elem + "):");
    line("  linalg.yield " + a + " : " + w.elem);
    line("} -> " + flipped.type());
    Shape wt = {f, cg};
    wt.insert(wt.end(), kernel.begin(), kernel.end());
    Value weights = reshape(flipped, wt);
    Shape out_spatial;
    for (size_t k = 0; k < spatial; ++k)
      out_spatial.push_back(padded.shape[k + 2] - (kernel[k] - 1) * dilations[k]);
    Value y = conv_core(padded, weights, Shape(spatial, 1), dilations, group, out_spatial);
    if (has_input(2)) y = add_channel_bias(y, input(2));
    return y;
  }

  Value conv_op(const std::string& name, const std::string& attrs, Value& x, Value& w,
                const Shape& out_shape, const std::string& elem) {
    std::string acc = filled(elem, out_shape, 0);
    Value out;
    out.elem = elem;
    out.shape = out_shape;
    out.ssa = fresh();
    line(out.ssa + " = " + name + " " + attrs + " ins(" + ssa(x) + ", " + ssa(w) + " : " +
         x.type() + ", " + w.type() + ") outs(" + acc + " : " + out.type() + ") -> " + out.type());
    return out;
  }

  // The input of the Relu that computes the value `name` for this node alone: a max pool of it
  // then Relu gives the same (Relu is monotone, NaN included) on the pool's 4x smaller output,
  // where it joins the pool's kernel (with the Conv bias bias_waits_for_pool left for it). Null
  // when there is no such Relu.
  const Value* before_relu(const std::string& name) {
    auto made = producer_.find(name);
    if (made == producer_.end() || made->second->op_type() != "Relu" ||
        consumers_.count(name) != 1 || made->second->input_size() != 1)
      return nullptr;
    auto v = values_.find(made->second->input(0));
    return v == values_.end() ? nullptr : &v->second;
  }

  Value pool(bool is_max) {
    if (is_max && pools_a_relu(*node_)) {
      if (const Value* source = before_relu(node_->input(0))) {
        const std::string& relu_input = producer_.at(node_->input(0))->input(0);
        auto bias = deferred_bias_.find(relu_input);
        if (bias != deferred_bias_.end() || (is_float_type(source->elem) && !source->is_const)) {
          Value pooled = pool_of(*source, is_max);
          if (bias != deferred_bias_.end()) pooled = add_channel_bias(pooled, bias->second);
          return unary("Relu", pooled);
        }
      }
    }
    return pool_of(input(0), is_max);
  }

  Value pool_of(Value x, bool is_max) {
    if (node_->output_size() > 1 && !node_->output(1).empty())
      fail(where_ + ": the Indices output of MaxPool is not supported");
    size_t spatial = x.shape.size() - 2;
    if (x.shape.size() < 3 || spatial > 3)
      fail(where_ + ": only 1-D, 2-D and 3-D pooling is supported");
    Shape kernel = attr_ints("kernel_shape").value_or(Shape{});
    if (kernel.size() != spatial) fail(where_ + ": kernel_shape is missing or of the wrong rank");
    bool ceil_mode = attr_int("ceil_mode", 0) != 0;
    Shape in_spatial(x.shape.begin() + 2, x.shape.end());
    Window win = window(in_spatial, kernel, ceil_mode);
    Shape original_out = {x.shape[0], x.shape[1]};
    original_out.insert(original_out.end(), win.out.begin(), win.out.end());
    if (spatial == 1) {
      x = reshape(x, {x.shape[0], x.shape[1], 1, x.shape[2]});
      in_spatial.insert(in_spatial.begin(), 1);
      for (Shape* s : {&win.kernel, &win.strides, &win.dilations, &win.out})
        s->insert(s->begin(), 1);
      win.low.insert(win.low.begin(), 0);
      win.high.insert(win.high.begin(), 0);
      spatial = 2;
    }
    // Extra end padding for windows ceil_mode adds.
    Shape high = win.high;
    for (size_t k = 0; k < spatial; ++k) {
      int64_t need = (win.out[k] - 1) * win.strides[k] + (win.kernel[k] - 1) * win.dilations[k] + 1;
      int64_t have = in_spatial[k] + win.low[k] + win.high[k];
      if (need > have) high[k] += need - have;
    }
    std::string elem = x.elem;
    double fill = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    if (!is_float_type(elem) && is_max) fill = double(std::numeric_limits<int64_t>::min());
    Shape pad_low = {0, 0}, pad_high = {0, 0};
    pad_low.insert(pad_low.end(), win.low.begin(), win.low.end());
    pad_high.insert(pad_high.end(), high.begin(), high.end());
    if (!is_float_type(elem) && is_max) {  // the smallest value of the element type
      int bits = bit_width(elem);
      fill = bits >= 64 ? -9.2233720368547758e18 : -std::ldexp(1.0, bits - 1);
    }
    Value padded = pad(x, pad_low, pad_high, fill);
    Shape out_shape = {x.shape[0], x.shape[1]};
    out_shape.insert(out_shape.end(), win.out.begin(), win.out.end());
    bool f = is_float_type(elem);
    if (spatial == 2 && is_max && f && win.out[1] >= kMinPoolTapsRow &&
        product(win.kernel) <= kMaxPoolTaps)
      return reshape(max_pool_taps(padded, win, out_shape), original_out);
    if (spatial == 2 && is_max && f && win.out[1] < kMinRowForDepthwise)
      return reshape(max_pool_channels_last(padded, win, out_shape), original_out);
    if (spatial == 2 && is_max && f) {
      // Loops n, c, oh, kh, kw, ow: the output column loop innermost, so each window tap is one
      // pass along a row (vectorised), instead of linalg's pooling order with the 3-long tap
      // loops innermost (scalar: squeezenet's three max pools were 18% of its time).
      std::string head = "affine_map<(d0, d1, d2, d3, d4, d5) -> (";
      std::string xmap = window_input_map(win.strides, win.dilations, false);
      std::string wmap = head + "d3, d4)>", ymap = head + "d0, d1, d2, d5)>";
      // The window operand (only its shape is read) bounds the tap loops.
      std::string window_t = empty(elem, win.kernel);
      Value y = window_generic(padded, window_t, tensor_type(elem, win.kernel), xmap, wmap, ymap,
                               out_shape, fill,
                               [&](const std::string& a, const std::string&, const std::string& o) {
                                 return op("arith.maximumf", {o, a}, elem);
                               });
      return reshape(y, original_out);
    }
    std::string acc = filled(elem, out_shape, fill);
    Value y;
    y.elem = elem;
    y.shape = out_shape;
    y.ssa = fresh();
    std::string combine =
        is_max ? (f ? "arith.maximumf" : "arith.maxsi") : (f ? "arith.addf" : "arith.addi");
    if (spatial == 2) {
      std::string attrs = "{dilations = dense<[" + i64_list(win.dilations) +
                          "]> : tensor<2xi64>, strides = dense<[" + i64_list(win.strides) +
                          "]> : tensor<2xi64>}";
      std::string window_t = empty(elem, win.kernel);
      line(y.ssa + " = " +
           std::string(is_max ? "linalg.pooling_nchw_max" : "linalg.pooling_nchw_sum") + " " +
           attrs + " ins(" + ssa(padded) + ", " + window_t + " : " + padded.type() + ", " +
           tensor_type(elem, win.kernel) + ") outs(" + acc + " : " + y.type() + ") -> " + y.type());
    } else {  // loops n, c, o_1..o_s (parallel), k_1..k_s (reduction)
      size_t loops = 2 + 2 * spatial;
      std::string xmap = "affine_map<(" + dims_list(loops) + ") -> (d0, d1";
      std::string ymap = "affine_map<(" + dims_list(loops) + ") -> (d0, d1";
      for (size_t k = 0; k < spatial; ++k) {
        xmap += ", d" + std::to_string(2 + k) + " * " + std::to_string(win.strides[k]) + " + d" +
                std::to_string(2 + spatial + k) + " * " + std::to_string(win.dilations[k]);
        ymap += ", d" + std::to_string(2 + k);
      }
      // The window operand (only its shape is read) bounds the reduction loops, as in linalg's
      // named pooling ops.
      std::string wmap = "affine_map<(" + dims_list(loops) + ") -> (";
      for (size_t k = 0; k < spatial; ++k)
        wmap += (k ? ", d" : "d") + std::to_string(2 + spatial + k);
      xmap += ")>";
      ymap += ")>";
      wmap += ")>";
      std::string window_t = empty(elem, win.kernel);
      std::vector<bool> reduction(loops, false);
      for (size_t k = 2 + spatial; k < loops; ++k) reduction[k] = true;
      line(y.ssa + " = linalg.generic {indexing_maps = [" + xmap + ", " + wmap + ", " + ymap +
           "], iterator_types = " + iterators(reduction) + "} ins(" + ssa(padded) + ", " +
           window_t + " : " + padded.type() + ", " + tensor_type(elem, win.kernel) + ") outs(" +
           acc + " : " + y.type() + ") {");
      std::string a = "%b" + std::to_string(next_id_++), o = "%b" + std::to_string(next_id_++);
      std::string unused = "%b" + std::to_string(next_id_++);
      line("^bb0(" + a + ": " + elem + ", " + unused + ": " + elem + ", " + o + ": " + elem + "):");
      line("  linalg.yield " + op(combine, {o, a}, elem) + " : " + elem);
      line("} -> " + y.type());
    }
    if (!is_max) {
      // Divide by the number of elements each window covered (pads counted only when asked).
      bool include_pad = attr_int("count_include_pad", 0) != 0;
      std::vector<std::vector<int64_t>> covered_per_dim(spatial);
      for (size_t k = 0; k < spatial; ++k)
        for (int64_t o = 0; o < win.out[k]; ++o) {
          int64_t lo_limit = include_pad ? -win.low[k] : 0;
          int64_t hi_limit = include_pad ? in_spatial[k] + win.high[k] : in_spatial[k];
          int64_t covered = 0;
          for (int64_t j = 0; j < win.kernel[k]; ++j) {
            int64_t p = o * win.strides[k] - win.low[k] + j * win.dilations[k];
            covered += p >= lo_limit && p < hi_limit;
          }
          covered_per_dim[k].push_back(covered);
        }
      std::vector<double> counts;
      int64_t windows = product(win.out);
      for (int64_t flat = 0; flat < windows; ++flat) {
        int64_t rem = flat, count = 1;
        for (int64_t k = int64_t(spatial) - 1; k >= 0; --k) {
          count *= covered_per_dim[k][rem % win.out[k]];
          rem /= win.out[k];
        }
        counts.push_back(double(std::max<int64_t>(count, 1)));
      }
      Value divisor = make_const_floats(elem, win.out, counts);
      bool uniform =
          std::all_of(counts.begin(), counts.end(), [&](double c) { return c == counts[0]; });
      if (uniform) divisor = make_const_floats(elem, {}, {counts[0]});
      y = binary("Div", y, divisor);
    }
    return reshape(y, original_out);
  }

  // Windows of up to this many taps are pooled by max_pool_taps.
  static constexpr int64_t kMaxPoolTaps = 16;
  static constexpr int64_t kMinPoolTapsRow = 8;

  // A 2-D float max pool as one elementwise kernel over the NCHW output: the maximum of its KHxKW
  // taps, tap (i, j) the padded input read at (oh * SH + i * DH, ow * SW + j * DW). Each output is
  // written once, a vector of outputs at a time (kiln reads a stride-2 tap as contiguous loads and
  // a shuffle), instead of once per tap along the output row with stride-2 reads (squeezenet1_1's
  // 111-wide stem pool alone: 1.8x faster).
  Value max_pool_taps(Value& padded, const Window& win, const Shape& out_shape) {
    std::string elem = padded.elem;
    // Each tap a view of the padded input from its first pixel, just long enough for its
    // strided reads: linalg takes each loop's range from the first operand that indexes it
    // directly, and a stride-1 tap read straight from the padded input would give the padding's.
    const Shape span = {out_shape[0], out_shape[1], (out_shape[2] - 1) * win.strides[0] + 1,
                        (out_shape[3] - 1) * win.strides[1] + 1};
    std::string map = "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * " +
                      std::to_string(win.strides[0]) + ", d3 * " + std::to_string(win.strides[1]) +
                      ")>, ";
    std::string maps, types, ins;
    for (int64_t i = 0; i < win.kernel[0]; ++i)
      for (int64_t j = 0; j < win.kernel[1]; ++j) {
        Value tap =
            slice(padded, {0, 0, i * win.dilations[0], j * win.dilations[1]}, span, {1, 1, 1, 1});
        maps += map;
        ins += (ins.empty() ? "" : ", ") + ssa(tap);
        types += (types.empty() ? "" : ", ") + tap.type();
      }
    std::string head = "affine_map<(d0, d1, d2, d3) -> (d0, d1, ";
    Value y;
    y.elem = elem;
    y.shape = out_shape;
    std::string init = empty(elem, out_shape);
    y.ssa = fresh();
    line(y.ssa + " = linalg.generic {indexing_maps = [" + maps + head + "d2, d3)>], " +
         "iterator_types = " + iterators(std::vector<bool>(4, false)) + "} ins(" + ins + " : " +
         types + ") outs(" + init + " : " + y.type() + ") {");
    std::vector<std::string> taps(product(win.kernel));
    std::string args;
    for (std::string& tap : taps) {
      tap = "%b" + std::to_string(next_id_++);
      args += tap + ": " + elem + ", ";
    }
    line("^bb0(" + args + "%b" + std::to_string(next_id_++) + ": " + elem + "):");
    // PyTorch's rule: the first of the largest taps, NaN where any tap is NaN. As a tree of
    // `b > a ? b : a` (one maxps on x86; ties keep the earlier tap, as a running maximum does) and
    // one unordered compare per pair of taps, the NaN put in at the end: about half the
    // instructions of a running maximum that tests each tap for NaN, whose chain of compares and
    // selects bound the 111-wide stem pool.
    std::vector<std::string> level = taps;
    while (level.size() > 1) {
      std::vector<std::string> next;
      for (size_t k = 0; k + 1 < level.size(); k += 2) {
        std::string greater = op("arith.cmpf", {level[k + 1], level[k]}, elem, "ogt,");
        next.push_back(op("arith.select", {greater, level[k + 1], level[k]}, elem));
      }
      if (level.size() % 2 == 1) next.push_back(level.back());
      level = std::move(next);
    }
    std::string largest = level[0];
    std::string any_nan;
    for (size_t k = 0; k < taps.size(); k += 2) {
      const std::string& other = k + 1 < taps.size() ? taps[k + 1] : taps[k];
      std::string nan = op("arith.cmpf", {taps[k], other}, elem, "uno,");
      any_nan = any_nan.empty() ? nan : op("arith.ori", {any_nan, nan}, "i1");
    }
    if (taps.size() > 1) {
      std::string quiet_nan = fresh();
      line("  " + quiet_nan + " = arith.constant " + quiet_nan_bits(elem) + " : " + elem);
      largest = op("arith.select", {any_nan, quiet_nan, largest}, elem);
    }
    line("  linalg.yield " + largest + " : " + elem);
    line("} -> " + y.type());
    return y;
  }

  // A quiet NaN of a float type, as the hexadecimal literal arith.constant takes.
  static std::string quiet_nan_bits(const std::string& elem) {
    if (elem == "f16") return "0x7E00";
    if (elem == "f64") return "0x7FF8000000000000";
    return "0x7FC00000";
  }

  // A 2-D float max pool computed channels-last with the channel loop innermost, for output rows
  // too short to vectorise along (squeezenet's 13- and 27-wide pools: 4.7x and 1.5x faster
  // including the two transposes).
  Value max_pool_channels_last(Value& padded, const Window& win, const Shape& out_shape) {
    std::string elem = padded.elem;
    Value xl = transpose(padded, {0, 2, 3, 1});
    Shape out = {out_shape[0], out_shape[2], out_shape[3], out_shape[1]};
    // Loops n, oh, ow, kh, kw, c.
    std::string head = "affine_map<(d0, d1, d2, d3, d4, d5) -> (";
    std::string xmap = window_input_map(win.strides, win.dilations, true);
    std::string wmap = head + "d3, d4)>", ymap = head + "d0, d1, d2, d5)>";
    std::string window_t = empty(elem, win.kernel);
    Value y = window_generic(xl, window_t, tensor_type(elem, win.kernel), xmap, wmap, ymap, out,
                             -std::numeric_limits<double>::infinity(),
                             [&](const std::string& a, const std::string&, const std::string& o) {
                               return op("arith.maximumf", {o, a}, elem);
                             });
    return transpose(y, {0, 3, 1, 2});
  }

  // A feature map that is the transpose of a channels-last value (channels_last_of_) is pooled
  // from that value, over its rows of pixels: the transpose back to NCHW is then dead code
  // (squeezenet1_1's classifier: 1000x169, ~50 us).
  Value global_pool(bool is_max) {
    Value& x = input(0);
    std::optional<Value> last = channels_last(x);
    if (last && x.shape[0] != 1) last.reset();
    Value source = last ? *last : x;
    std::vector<int64_t> axes = {1, 2};  // H and W of channels-last (1, H, W, C)
    if (!last) {
      axes.clear();  // every spatial axis of (N, C, ...)
      for (size_t k = 2; k < x.shape.size(); ++k) axes.push_back(int64_t(k));
    }
    std::string elem = x.elem;
    // (1, 1, 1, C) and (1, C, 1, 1) hold the same values in the same order.
    auto as_nchw = [&](Value pooled) {
      return last ? reshape(pooled, {1, x.shape[1], 1, 1}) : pooled;
    };
    if (is_max) {
      return as_nchw(reduce(
          source, axes, true, elem, -std::numeric_limits<double>::infinity(),
          [](const std::string& v) { return v; },
          [&, elem](const std::string& a, const std::string& v) {
            return op("arith.maximumf", {a, v}, elem);
          }));
    }
    Value sum = as_nchw(reduce(
        source, axes, true, elem, 0, [](const std::string& v) { return v; },
        [&, elem](const std::string& a, const std::string& v) { return sum_step(a, v, elem); }));
    Value n = make_const_floats(elem, {}, {double(product(x.shape, 2))});
    return binary("Div", sum, n);
  }

  Value batch_norm() {
    Value& x = input(0);
    if (attr_int("training_mode", 0)) fail(where_ + ": training mode is not supported");
    double eps = attr_float("epsilon", 1e-5);
    Shape param_shape = {x.shape[1]};
    for (size_t k = 2; k < x.shape.size(); ++k) param_shape.push_back(1);
    Value scale = reshape(input(1), param_shape), bias = reshape(input(2), param_shape);
    Value mean = reshape(input(3), param_shape), var = reshape(input(4), param_shape);
    std::string elem = x.elem;
    return elementwise(
        {&x, &scale, &bias, &mean, &var}, elem, x.shape,
        [&, elem, eps](const std::vector<std::string>& a) {
          std::string centered = op("arith.subf", {a[0], a[3]}, elem);
          std::string denom =
              op("math.sqrt", {op("arith.addf", {a[4], k_in_body(elem, eps)}, elem)}, elem);
          std::string norm = op("arith.divf", {centered, denom}, elem);
          return op("arith.addf", {op("arith.mulf", {norm, a[1]}, elem), a[2]}, elem);
        });
  }

  Value sum_over(Value& x, const std::vector<int64_t>& axes) {
    std::string elem = x.elem;
    return reduce(
        x, axes, true, elem, 0, [](const std::string& v) { return v; },
        [&, elem](const std::string& a, const std::string& v) { return sum_step(a, v, elem); });
  }

  // Y, and where asked for, Mean and InvStdDev (reduced dimensions kept as 1).
  std::vector<Value> layer_norm() {
    Value x = input(0);
    int64_t rank = int64_t(x.shape.size());
    int64_t axis = normalize_axis(attr_int("axis", -1), rank, where_);
    double eps = attr_float("epsilon", 1e-5);
    std::vector<int64_t> axes;
    for (int64_t k = axis; k < rank; ++k) axes.push_back(k);
    double n = double(product(x.shape, axis));
    std::string elem = x.elem;
    Value sum = sum_over(x, axes);
    Value count = make_const_floats(elem, {}, {n});
    Value mean = binary("Div", sum, count);
    Value centered = binary("Sub", x, mean);
    Value squared = binary("Mul", centered, centered);
    Value var_sum = sum_over(squared, axes);
    Value inv_std_dev = elementwise(
        {&var_sum}, elem, var_sum.shape, [&, elem, eps, n](const std::vector<std::string>& a) {
          std::string var = op("arith.divf", {a[0], k_in_body(elem, n)}, elem);
          std::string denom =
              op("math.sqrt", {op("arith.addf", {var, k_in_body(elem, eps)}, elem)}, elem);
          return op("arith.divf", {k_in_body(elem, 1), denom}, elem);
        });
    Value scale = input(1);
    std::vector<Value*> ins = {&centered, &inv_std_dev, &scale};
    Value bias;
    if (has_input(2)) {
      bias = input(2);
      ins.push_back(&bias);
    }
    bool with_bias = has_input(2);
    Value y =
        elementwise(ins, elem, x.shape, [&, elem, with_bias](const std::vector<std::string>& a) {
          std::string y = op("arith.mulf", {op("arith.mulf", {a[0], a[1]}, elem), a[2]}, elem);
          return with_bias ? op("arith.addf", {y, a[3]}, elem) : y;
        });
    return {y, mean, inv_std_dev};
  }

  Value softmax(bool log) {
    Value x = input(0);
    int64_t rank = int64_t(x.shape.size());
    int64_t axis = normalize_axis(attr_int("axis", opset_ >= 13 ? -1 : 1), rank, where_);
    Shape original = x.shape;
    std::vector<int64_t> axes;
    if (opset_ < 13) {  // softmax over the flattened dimensions from `axis` on
      x = reshape(x, {product(original, 0, axis), product(original, axis)});
      axes = {1};
    } else {
      axes = {axis};
    }
    std::string elem = x.elem;
    Value max = reduce(
        x, axes, true, elem, -std::numeric_limits<double>::infinity(),
        [](const std::string& v) { return v; },
        [&, elem](const std::string& a, const std::string& v) {
          return op("arith.maximumf", {a, v}, elem);
        });
    Value shifted = binary("Sub", x, max);
    Value e = unary("Exp", shifted);
    Value sum = sum_over(e, axes);
    Value y = log ? binary("Sub", shifted, unary("Log", sum)) : binary("Div", e, sum);
    return reshape(y, original);
  }

  Value reduce_node(const std::string& t) {
    Value& x = input(0);
    int64_t rank = int64_t(x.shape.size());
    bool keepdims = attr_int("keepdims", 1) != 0;
    std::optional<std::vector<int64_t>> axes_given;
    bool axes_as_input = (t == "ReduceSum" && opset_ >= 13) || opset_ >= 18;
    if (axes_as_input) {
      if (has_input(1)) axes_given = const_ints(1, "axes");
    } else {
      axes_given = attr_ints("axes");
    }
    std::vector<int64_t> axes;
    if (axes_given && !axes_given->empty()) {
      for (int64_t a : *axes_given) axes.push_back(normalize_axis(a, rank, where_));
    } else if (attr_int("noop_with_empty_axes", 0)) {
      return x;
    } else {
      for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
    }
    std::string elem = x.elem;
    bool f = is_float_type(elem);
    auto id = [](const std::string& v) { return v; };
    auto add = [&, elem](const std::string& a, const std::string& v) {
      return sum_step(a, v, elem);
    };
    int64_t count = 1;
    for (int64_t a : axes) count *= x.shape[a];
    if (t == "ReduceSum") return reduce(x, axes, keepdims, elem, 0, id, add);
    if (t == "ReduceMean") {
      Value s = reduce(x, axes, keepdims, elem, 0, id, add);
      Value n =
          f ? make_const_floats(elem, {}, {double(count)}) : make_const_ints({}, {count}, elem);
      return binary("Div", s, n);
    }
    if (t == "ReduceMax" || t == "ReduceMin") {
      bool is_max = t == "ReduceMax";
      double init = f ? (is_max ? -1 : 1) * std::numeric_limits<double>::infinity()
                      : double(is_max ? std::numeric_limits<int32_t>::min()
                                      : std::numeric_limits<int32_t>::max());
      if (!f && elem == "i64")
        init = is_max ? double(std::numeric_limits<int64_t>::min())
                      : double(std::numeric_limits<int64_t>::max());
      std::string name = f ? (is_max ? "arith.maximumf" : "arith.minimumf")
                           : (is_max ? "arith.maxsi" : "arith.minsi");
      return reduce(x, axes, keepdims, elem, init, id,
                    [&, elem, name](const std::string& a, const std::string& v) {
                      return op(name, {a, v}, elem);
                    });
    }
    if (t == "ReduceProd")
      return reduce(x, axes, keepdims, elem, 1, id,
                    [&, elem, f](const std::string& a, const std::string& v) {
                      return op(f ? "arith.mulf" : "arith.muli", {a, v}, elem);
                    });
    if (!f) fail(where_ + ": " + t + " of integers is not supported");
    if (t == "ReduceSumSquare" || t == "ReduceL2") {
      Value s = reduce(
          x, axes, keepdims, elem, 0,
          [&, elem](const std::string& v) {
            return op("arith.mulf", {v, v}, elem);
          },
          add);
      return t == "ReduceL2" ? unary("Sqrt", s) : s;
    }
    if (t == "ReduceL1")
      return reduce(
          x, axes, keepdims, elem, 0,
          [&, elem](const std::string& v) { return op("math.absf", {v}, elem); }, add);
    if (t == "ReduceLogSum") {
      Value s = reduce(x, axes, keepdims, elem, 0, id, add);
      return unary("Log", s);
    }
    if (t == "ReduceLogSumExp") {
      Value m = reduce(x, axes, true, elem, -std::numeric_limits<double>::infinity(), id,
                       [&, elem](const std::string& a, const std::string& v) {
                         return op("arith.maximumf", {a, v}, elem);
                       });
      Value shifted = binary("Sub", x, m);
      Value e = unary("Exp", shifted);
      Value s = reduce(e, axes, true, elem, 0, id, add);
      Value r = binary("Add", unary("Log", s), m);
      if (keepdims) return r;
      Shape shape;
      for (int64_t k = 0; k < rank; ++k)
        if (std::find(axes.begin(), axes.end(), k) == axes.end()) shape.push_back(x.shape[k]);
      return reshape(r, shape);
    }
    fail(where_ + ": unsupported reduction");
  }

  Value arg_reduce(bool is_max) {
    Value& x = input(0);
    int64_t axis = normalize_axis(attr_int("axis", 0), int64_t(x.shape.size()), where_);
    return arg_reduce_value(x, axis, is_max, attr_int("keepdims", 1) != 0,
                            attr_int("select_last_index", 0) != 0);
  }

  Value arg_reduce_value(Value& x, int64_t axis, bool is_max, bool keepdims = true,
                         bool last = false) {
    int64_t rank = int64_t(x.shape.size());
    std::string elem = x.elem;
    bool f = is_float_type(elem);
    Shape out_shape;
    std::string out_map = "affine_map<(" + dims_list(rank) + ") -> (";
    bool first = true;
    std::vector<bool> reduced(rank, false);
    reduced[axis] = true;
    for (int64_t k = 0; k < rank; ++k) {
      if (k == axis) continue;
      out_shape.push_back(x.shape[k]);
      out_map += (first ? "" : ", ") + std::string("d") + std::to_string(k);
      first = false;
    }
    out_map += ")>";
    double init = f ? (is_max ? -1 : 1) * std::numeric_limits<double>::infinity()
                    : (is_max ? -9.2e18 : 9.2e18);
    std::string best = filled(elem, out_shape, init);
    std::string index = filled("i64", out_shape, 0);
    std::string vt = tensor_type(elem, out_shape), it = tensor_type("i64", out_shape);
    std::string r = fresh();
    line(r + ":2 = linalg.generic {indexing_maps = [" + broadcast_map(x.shape, x.shape) + ", " +
         out_map + ", " + out_map + "], iterator_types = " + iterators(reduced) + "} ins(" +
         ssa(x) + " : " + x.type() + ") outs(" + best + ", " + index + " : " + vt + ", " + it +
         ") {");
    std::string v = "%b" + std::to_string(next_id_++), b = "%b" + std::to_string(next_id_++),
                i = "%b" + std::to_string(next_id_++);
    line("^bb0(" + v + ": " + elem + ", " + b + ": " + elem + ", " + i + ": i64):");
    std::string pos = index_of(int(axis));
    std::string pos64 = fresh();
    line("  " + pos64 + " = arith.index_cast " + pos + " : index to i64");
    std::string pred = is_max ? (last ? "oge" : "ogt") : (last ? "ole" : "olt");
    std::string ipred = is_max ? (last ? "sge" : "sgt") : (last ? "sle" : "slt");
    std::string better = cmp(elem, pred, ipred, v, b);
    // The first element always wins (covers NaN-free inputs equal to the initial value).
    std::string zero = fresh();
    line("  " + zero + " = arith.constant 0 : index");
    std::string is_first = fresh();
    line("  " + is_first + " = arith.cmpi eq, " + pos + ", " + zero + " : index");
    std::string take = fresh();
    line("  " + take + " = arith.ori " + better + ", " + is_first + " : i1");
    std::string nb = select(take, v, b, elem);
    std::string ni = select(take, pos64, i, "i64");
    line("  linalg.yield " + nb + ", " + ni + " : " + elem + ", i64");
    line("} -> (" + vt + ", " + it + ")");
    Value out;
    out.elem = "i64";
    out.shape = out_shape;
    out.ssa = r + "#1";
    if (keepdims) {
      Shape kept = x.shape;
      kept[axis] = 1;
      return reshape(out, kept);
    }
    return out;
  }

  Value trilu() {
    Value& x = input(0);
    bool upper = attr_int("upper", 1) != 0;
    int64_t k = has_input(1) ? const_input(1, "k").as_int(0) : 0;
    size_t rank = x.shape.size();
    if (rank < 2) fail(where_ + ": input must have rank >= 2");
    std::string elem = x.elem;
    return elementwise({&x}, elem, x.shape,
                       [&, upper, k, rank, elem](const std::vector<std::string>& a) {
                         std::string row = index_of(int(rank - 2)), col = index_of(int(rank - 1));
                         std::string diff = fresh();
                         line("  " + diff + " = arith.subi " + col + ", " + row + " : index");
                         std::string kc = fresh();
                         line("  " + kc + " = arith.constant " + std::to_string(k) + " : index");
                         std::string keep = fresh();
                         line("  " + keep + " = arith.cmpi " + (upper ? "sge" : "sle") + ", " +
                              diff + ", " + kc + " : index");
                         return select(keep, a[0], k_in_body(elem, 0), elem);
                       });
  }

  const onnx::ModelProto& model_;
  const ImportRequest& request_;
  int64_t opset_ = 0;
  std::map<std::string, Value> values_;
  const onnx::NodeProto* node_ = nullptr;
  std::string where_;
  std::ostringstream body_;
  // Values computed from bound weights alone, once at load (see transposed_weights).
  std::vector<std::string> weight_arguments_;  // "%argN: type" of each bound weight
  std::vector<size_t> weight_argument_index_;  // its N
  std::vector<std::string> weight_elems_;      // its element type
  std::set<std::string> bound_weight_ssa_;
  std::ostringstream prepare_body_;
  std::vector<Value> prepared_;                // main's extra arguments
  std::vector<std::string> prepared_results_;  // their SSA names in the prepare function
  std::map<std::string, size_t> prepared_by_source_;
  // One image's feature maps (1, C, H, W) that are a reshape of a (C, H*W) value (the product a
  // convolution computed), by SSA name: elementwise kernels on them compute on the product's
  // layout (elementwise_on_planes).
  std::map<std::string, Value> plane_of_;
  // NCHW value (by SSA name) -> the same data channels-last, (N, H, W, C), where one exists.
  std::map<std::string, Value> channels_last_of_;
  // The nodes that read each value, by name.
  std::multimap<std::string, const onnx::NodeProto*> consumers_;
  std::map<std::string, const onnx::NodeProto*> producer_;
  std::set<std::string> graph_outputs_;
  // Conv biases left for the max pool after the Conv's ReLU to add (bias_waits_for_pool), by the
  // Conv's output name.
  std::map<std::string, Value> deferred_bias_;
  int next_id_ = 0;
};

}  // namespace

Result<std::string> import(const ImportRequest& request) {
  onnx::ModelProto model;
  if (request.model_bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(request.model_bytes.data(), int(request.model_bytes.size())))
    return invalid_argument(request.model_name +
                            ": error: not a valid ONNX model (protobuf parsing failed); is the "
                            "file complete? re-export it");
  try {
    Importer importer(model, request);
    if (request.check_only) return importer.unsupported_nodes();
    return importer.run();
  } catch (const ImportError& e) {
    return unimplemented(request.model_name + ": error: " + e.message);
  } catch (const std::exception& e) {
    return invalid_argument(request.model_name + ": error: " + e.what());
  }
}

}  // namespace kiln::onnx_import

extern "C" __attribute__((visibility("default"))) void kiln_onnx_import_to_mlir(
    const kiln::onnx_import::ImportRequest& request, kiln::Result<std::string>* out) {
  *out = kiln::onnx_import::import(request);
}

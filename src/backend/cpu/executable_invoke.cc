// Calling an executable's entries: arguments checked against the signature, descriptors packed,
// results taken over (or copied when strided), kernel times recorded for PGLE. No MLIR or LLVM.
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "backend/cpu/checked_alloc.h"
#include "backend/cpu/executable_internal.h"
#include "backend/cpu/host_callback_dispatch.h"
#include "core/machine_memory.h"
#include "core/tensor_memory.h"
#include "kiln/executable.h"

namespace kiln {
namespace {

using cpu::PackedEntry;

// MLIR's strided memref descriptor, rank-erased: {allocated, aligned, offset, sizes[r],
// strides[r]}.
struct DescriptorView {
  int64_t* slots;
  int rank;
  void* allocated() const { return reinterpret_cast<void*>(slots[0]); }
  char* aligned() const { return reinterpret_cast<char*>(slots[1]); }
  int64_t offset() const { return slots[2]; }
  int64_t size(int i) const { return slots[3 + i]; }
  int64_t stride(int i) const { return slots[3 + rank + i]; }
};

size_t descriptor_slots(size_t rank) { return 3 + 2 * rank; }

void fill_input_descriptor(int64_t* slots, const Buffer& buffer) {
  size_t rank = buffer.shape().size();
  slots[0] = reinterpret_cast<int64_t>(buffer.data());
  slots[1] = reinterpret_cast<int64_t>(buffer.data());
  slots[2] = 0;
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    slots[3 + i] = buffer.shape()[i];
    slots[3 + rank + i] = stride;
    stride *= buffer.shape()[i];
  }
}

// Copies a possibly strided result into a fresh dense buffer.
void copy_strided(const DescriptorView& d, size_t element_size, char* out) {
  std::vector<int64_t> index(d.rank, 0);
  int64_t total = 1;
  for (int i = 0; i < d.rank; ++i) total *= d.size(i);
  for (int64_t n = 0; n < total; ++n) {
    int64_t offset = d.offset();
    for (int i = 0; i < d.rank; ++i) offset += index[i] * d.stride(i);
    std::memcpy(out + n * element_size, d.aligned() + offset * element_size, element_size);
    for (int i = d.rank; i-- > 0;) {
      if (++index[i] < d.size(i)) break;
      index[i] = 0;
    }
  }
}

bool is_dense_row_major(const DescriptorView& d) {
  int64_t expected = 1;
  for (int i = d.rank; i-- > 0;) {
    if (d.size(i) != 1 && d.stride(i) != expected) return false;
    expected *= d.size(i);
  }
  return true;
}

// The run of an instrumented executable in progress on this thread (null when nobody profiles).
struct ActiveRun {
  const Executable* executable;
  uint64_t run;
  const std::vector<KernelInfo>* kernels;
  std::vector<KernelSample> samples;
  std::vector<std::chrono::steady_clock::time_point> started;
};
thread_local ActiveRun* t_active_run = nullptr;

}  // namespace

extern "C" int64_t kiln_profile_event(const void* site, int64_t kernel, int64_t phase) {
  ActiveRun* run = t_active_run;
  if (run == nullptr || run->executable != site || kernel < 0 ||
      static_cast<size_t>(kernel) >= run->samples.size())
    return 0;
  KernelSample& sample = run->samples[kernel];
  if (phase == 0) {
    sample.candidate = static_cast<int>(run->run % (*run->kernels)[kernel].candidates());
    run->started[kernel] = std::chrono::steady_clock::now();
    return sample.candidate;
  }
  sample.ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - run->started[kernel])
                   .count();
  sample.ran = true;
  return 0;
}

Result<std::vector<ReplicaResult>> Executable::execute_replicated(
    const std::string& entry, const std::vector<std::vector<Buffer>>& inputs_per_replica) const {
  if (static_cast<int>(inputs_per_replica.size()) != info_.num_replicas) {
    return invalid_argument("executable '" + info_.module_name + "' has " +
                            std::to_string(info_.num_replicas) + " replica(s), but " +
                            std::to_string(inputs_per_replica.size()) +
                            " set(s) of inputs were given (one per replica)");
  }
  std::vector<Result<std::vector<Buffer>>> results(inputs_per_replica.size(),
                                                   Result<std::vector<Buffer>>(Status()));
  std::vector<std::thread> threads;
  for (size_t r = 0; r < inputs_per_replica.size(); ++r)
    threads.emplace_back([&, r] { results[r] = execute(entry, inputs_per_replica[r]); });
  for (auto& t : threads) t.join();
  std::vector<ReplicaResult> out;
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].ok()) {
      return Status(results[r].status().code(),
                    "replica " + std::to_string(r) + ": " + results[r].status().message());
    }
    out.push_back({info_.replica_devices[r], std::move(results[r]).value()});
  }
  return out;
}

Result<const EntryPoint*> Executable::find_entry(const std::string& name) const {
  std::string names;
  for (const EntryPoint& e : entry_points_) {
    if (e.name == name) return &e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  return not_found("no entry function '" + name + "' in module '" + info_.module_name +
                   "'; its public functions are: " + (names.empty() ? "(none)" : names));
}

Result<std::vector<Buffer>> Executable::execute(const std::string& entry_name,
                                                const std::vector<Buffer>& inputs) const {
  return execute(entry_name, inputs, nullptr);
}

namespace {

Status check_arguments(const EntryPoint& entry, const std::vector<Buffer>& inputs) {
  if (inputs.size() != entry.inputs.size()) {
    return invalid_argument("entry '" + entry.name + "' takes " +
                            std::to_string(entry.inputs.size()) + " argument(s), " +
                            std::to_string(inputs.size()) + " given");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = entry.inputs[i];
    const Buffer& got = inputs[i];
    bool shape_ok = got.shape().size() == want.shape.size();
    for (size_t d = 0; shape_ok && d < want.shape.size(); ++d)
      shape_ok = want.shape[d] == kDynamicDim || want.shape[d] == got.shape()[d];
    if (got.dtype() != want.dtype || !shape_ok) {
      TensorType given = got.type();
      given.scalar = want.scalar && got.shape().empty();
      return invalid_argument("argument " + std::to_string(i) + " of '" + entry.name +
                              "': expected " + want.to_string() + ", given " + given.to_string());
    }
  }
  return Status();
}

// A static result larger than this machine's memory and swap is refused before any work, with
// the result named (the checking allocator would only stop the call when it got there).
Status check_results_fit_in_memory(const EntryPoint& entry) {
  for (size_t i = 0; i < entry.outputs.size(); ++i) {
    const TensorType& out = entry.outputs[i];
    if (!out.is_static()) continue;
    Result<size_t> bytes = dense_byte_size(out.dtype, out.shape);
    uint64_t memory = machine_memory_bytes();
    if (!bytes.ok() || (memory > 0 && *bytes > memory))
      return resource_exhausted(
          "result " + std::to_string(i) + " of '" + entry.name + "' (" + out.to_string() +
          ") needs " + (bytes.ok() ? std::to_string(*bytes) : std::string("more than 2^64")) +
          " bytes, more than this machine's memory and swap (" + std::to_string(memory) +
          " bytes)");
  }
  return Status();
}

// The packed call's arguments: args[0] points at the results' descriptors (if any), then one
// slot per input. A lone scalar result is returned by value instead: its slot comes after the
// inputs. Built in place: `args` points into the other members.
struct PackedCall {
  bool scalar_result = false;
  std::vector<int64_t> result_storage;
  std::vector<std::vector<int64_t>> input_storage;
  std::vector<void*> pointers;  // the values the packed args point at
  std::vector<void*> args;

  PackedCall(const EntryPoint& entry, const std::vector<Buffer>& inputs) {
    scalar_result = entry.outputs.size() == 1 && entry.outputs[0].scalar;
    size_t result_slots = scalar_result ? 1 : 0;
    for (const TensorType& t : entry.outputs)
      if (!t.scalar) result_slots += descriptor_slots(t.shape.size());
    result_storage.assign(result_slots, 0);
    input_storage.resize(inputs.size());
    pointers.reserve(inputs.size() + 1);
    if (!entry.outputs.empty() && !scalar_result) pointers.push_back(result_storage.data());
    for (size_t i = 0; i < inputs.size(); ++i) {
      input_storage[i].resize(descriptor_slots(inputs[i].shape().size()));
      fill_input_descriptor(input_storage[i].data(), inputs[i]);
      pointers.push_back(input_storage[i].data());
    }
    args.resize(pointers.size());
    for (size_t i = 0; i < pointers.size(); ++i) args[i] = &pointers[i];
    // Scalars are passed by value: the packed entry loads them straight from the buffer.
    size_t first_input = entry.outputs.empty() || scalar_result ? 0 : 1;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (entry.inputs[i].scalar) args[first_input + i] = inputs[i].data();
    if (scalar_result) args.push_back(result_storage.data());
  }
  PackedCall(const PackedCall&) = delete;
  PackedCall& operator=(const PackedCall&) = delete;
};

// The results the call wrote: buffers the program allocated are taken over when dense (one owner
// per allocation, even if shared), copied otherwise.
Result<std::vector<Buffer>> take_results(const EntryPoint& entry, PackedCall& call) {
  std::vector<Buffer> results;
  if (call.scalar_result) {
    KILN_ASSIGN_OR_RETURN(Buffer value, Buffer::allocate(entry.outputs[0].dtype, {}));
    std::memcpy(value.data(), call.result_storage.data(), dtype_size(entry.outputs[0].dtype));
    results.push_back(std::move(value));
  }
  std::map<void*, std::shared_ptr<void>> owners;
  size_t slot = 0;
  for (const TensorType& type : entry.outputs) {
    if (type.scalar) continue;
    DescriptorView d{call.result_storage.data() + slot, static_cast<int>(type.shape.size())};
    slot += descriptor_slots(type.shape.size());
    std::vector<int64_t> shape(d.rank);
    for (int i = 0; i < d.rank; ++i) shape[i] = d.size(i);
    size_t element_size = dtype_size(type.dtype);
    if (entry.results_owned) {
      std::shared_ptr<void>& owner = owners[d.allocated()];
      if (!owner) owner = std::shared_ptr<void>(d.allocated(), release_tensor_memory);
      if (is_dense_row_major(d)) {
        results.emplace_back(type.dtype, shape, d.aligned() + d.offset() * element_size, owner);
        continue;
      }
    }
    KILN_ASSIGN_OR_RETURN(Buffer copy, Buffer::allocate(type.dtype, shape));
    copy_strided(d, element_size, static_cast<char*>(copy.data()));
    results.push_back(std::move(copy));
  }
  return results;
}

}  // namespace

Result<std::vector<Buffer>> Executable::execute(const std::string& entry_name,
                                                const std::vector<Buffer>& inputs,
                                                PgleProfiler* profiler) const {
  KILN_ASSIGN_OR_RETURN(const EntryPoint* entry, find_entry(entry_name));
  KILN_RETURN_IF_ERROR(check_arguments(*entry, inputs));
  KILN_RETURN_IF_ERROR(check_results_fit_in_memory(*entry));
  PackedCall call(*entry, inputs);

  size_t entry_index = static_cast<size_t>(entry - entry_points_.data());
  auto entry_function = reinterpret_cast<PackedEntry>(entry_functions_[entry_index]);
  bool called = false;
  std::string allocation_error;
  cpu::CallbackErrorScope callback_errors;
  if (info_.kernels.empty()) profiler = nullptr;
  if (profiler && profiler->enabled()) {
    ActiveRun run{this, profiler->begin_run(), &info_.kernels,
                  std::vector<KernelSample>(info_.kernels.size()),
                  std::vector<std::chrono::steady_clock::time_point>(info_.kernels.size())};
    ActiveRun* outer = t_active_run;
    t_active_run = &run;
    called = cpu::call_checking_allocations(entry_function, call.args.data(), allocation_error);
    t_active_run = outer;
    if (called) profiler->record(info_.kernels, run.samples);
  } else {
    called = cpu::call_checking_allocations(entry_function, call.args.data(), allocation_error);
  }
  if (!called) return resource_exhausted("'" + entry->name + "': " + allocation_error);
  KILN_ASSIGN_OR_RETURN(std::vector<Buffer> results, take_results(*entry, call));
  if (!callback_errors.status().ok()) return callback_errors.status();
  return results;
}

}  // namespace kiln

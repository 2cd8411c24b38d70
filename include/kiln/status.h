// Status and Result<T>: how every kiln call reports failure. No exceptions cross the public API.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "kiln/export.h"

namespace kiln {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something wrong (bad file, shape, flag)
  kNotFound,
  kUnimplemented,  // valid input that kiln cannot handle yet
  kCompileError,   // the MLIR/LLVM pipeline rejected the program
  kIoError,
  kCorruption,  // stored bytes failed a check
  kInternal,
  kPermissionDenied,   // a trust check refused a file, directory or value
  kResourceExhausted,  // the input asks for more than kiln's limits allow
  kDeadlineExceeded,   // a wait or a request ran out of time (a slow server, a silent leader)
  kUnavailable,        // a server could not be reached or dropped the connection
  kAlreadyExists,      // what was to be created is there already (another writer was first)
};

KILN_EXPORT const char* status_code_name(StatusCode code);

class KILN_EXPORT Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: message".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}
inline Status not_found(std::string message) {
  return Status(StatusCode::kNotFound, std::move(message));
}
inline Status unimplemented(std::string message) {
  return Status(StatusCode::kUnimplemented, std::move(message));
}
inline Status compile_error(std::string message) {
  return Status(StatusCode::kCompileError, std::move(message));
}
inline Status io_error(std::string message) {
  return Status(StatusCode::kIoError, std::move(message));
}
inline Status corruption(std::string message) {
  return Status(StatusCode::kCorruption, std::move(message));
}
inline Status permission_denied(std::string message) {
  return Status(StatusCode::kPermissionDenied, std::move(message));
}
inline Status resource_exhausted(std::string message) {
  return Status(StatusCode::kResourceExhausted, std::move(message));
}
inline Status deadline_exceeded(std::string message) {
  return Status(StatusCode::kDeadlineExceeded, std::move(message));
}
inline Status unavailable(std::string message) {
  return Status(StatusCode::kUnavailable, std::move(message));
}
inline Status already_exists(std::string message) {
  return Status(StatusCode::kAlreadyExists, std::move(message));
}
inline Status internal_error(std::string message) {
  return Status(StatusCode::kInternal, std::move(message));
}

// Either a value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(state_); }
  // REQUIRES: !ok() for a meaningful message; returns OK status when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(state_); }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::kiln::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

// `KILN_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_result_, __LINE__), lhs, expr)

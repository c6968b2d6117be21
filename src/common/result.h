// Result<T>: a value of type T, or the Status explaining why there is none.
// (GCC 12 has no std::expected.) Same thread-safety as T.
#pragma once

#include <cassert>
#include <utility>
#include <variant>

#include "common/status.h"

namespace wanbackup {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}        // NOLINT: implicit
  Result(Status status) : state_(std::in_place_index<1>, std::move(status)) {  // NOLINT: implicit
    assert(!std::get<1>(state_).ok() && "a Result needs a value or a failed Status");
  }

  bool ok() const { return state_.index() == 0; }
  // The failure; OK when there is a value.
  Status status() const { return ok() ? Status::Ok() : std::get<1>(state_); }

  // REQUIRES: ok().
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace wanbackup

#define WB_CONCAT_INNER_(a, b) a##b
#define WB_CONCAT_(a, b) WB_CONCAT_INNER_(a, b)
// `lhs` may be a declaration (`auto x`) and `tmp` is declared here: neither can be put in
// parentheses, which is what bugprone-macro-parentheses asks.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define WB_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

// `WB_ASSIGN_OR_RETURN(auto x, Foo());` declares x from Foo()'s value, or returns its Status.
#define WB_ASSIGN_OR_RETURN(lhs, expr) \
  WB_ASSIGN_OR_RETURN_IMPL_(WB_CONCAT_(wb_result_, __LINE__), lhs, expr)

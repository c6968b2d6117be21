// Developer tracing: with WANBACKUP_TRACE=1 in the environment, Trace() prints timestamped lines
// (seconds since the first trace) to stderr. Off by default and nearly free when off. For
// diagnosing timing (connections, commands, retries) in the field. Thread-safe.
#pragma once

#include <cstdio>
#include <string>

namespace wanbackup {

bool TraceEnabled();
void TraceLine(const std::string& line);

// Formats like printf; evaluates nothing unless tracing is on.
#define WB_TRACE(...)                                                  \
  do {                                                                 \
    if (::wanbackup::TraceEnabled()) {                                 \
      char wb_trace_buf_[512];                                         \
      std::snprintf(wb_trace_buf_, sizeof wb_trace_buf_, __VA_ARGS__); \
      ::wanbackup::TraceLine(wb_trace_buf_);                           \
    }                                                                  \
  } while (false)

}  // namespace wanbackup

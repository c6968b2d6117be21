#include "direction.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "frame.h"

namespace wanem {
namespace {

int64_t NowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Packets read per wake-up before releasing due ones, so a flood in one direction cannot delay
// departures by more than a few microseconds.
constexpr int kReadBudget = 32;

}  // namespace

Direction::Direction(std::string name, int in_fd, int out_fd, size_t ring_bytes, int mtu,
                     uint64_t seed, bool super_packets)
    : name_(std::move(name)),
      in_fd_(in_fd),
      out_fd_(out_fd),
      super_packets_(super_packets),
      // One byte more than the largest frame: a read that fills the buffer was cut short.
      max_frame_(FrameHeaderBytes(super_packets) +
                 (super_packets ? kMaxIpBytes : static_cast<size_t>(mtu)) + 1),
      ring_(ring_bytes),
      shaper_(seed) {}

Direction::~Direction() {
  Stop();
  for (int fd : {epoll_fd_, timer_fd_, wake_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

bool Direction::Start(std::string* error) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || timer_fd_ < 0 || wake_fd_ < 0) {
    *error = std::string("epoll/timerfd/eventfd: ") + std::strerror(errno);
    return false;
  }
  for (int fd : {in_fd_, timer_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      *error = std::string("epoll_ctl: ") + std::strerror(errno);
      return false;
    }
  }
  thread_ = std::thread([this] { Run(); });
  return true;
}

void Direction::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  Wake();
  thread_.join();
}

void Direction::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void Direction::SetParams(const LinkParams& params) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_params_ = params;
  }
  params_generation_.fetch_add(1);
  Wake();
}

LinkParams Direction::params() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_params_;
}

DirectionStats Direction::Stats() const {
  DirectionStats s;
  s.rx_packets = rx_packets_.load();
  s.rx_bytes = rx_bytes_.load();
  s.tx_packets = tx_packets_.load();
  s.tx_bytes = tx_bytes_.load();
  s.drop_loss = drop_loss_.load();
  s.drop_queue = drop_queue_.load();
  s.drop_blackhole = drop_blackhole_.load();
  s.drop_overflow = drop_overflow_.load();
  s.tx_errors = tx_errors_.load();
  s.rx_frames = rx_frames_.load();
  s.tx_frames = tx_frames_.load();
  s.drop_malformed = drop_malformed_.load();
  s.queued_bytes = queued_bytes_.load();
  if (cpu_clock_valid_.load()) {
    timespec ts{};
    if (::clock_gettime(cpu_clock_.load(), &ts) == 0) {
      s.cpu_seconds = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
    }
  }
  return s;
}

void Direction::Run() {
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake-ups at the asked nanosecond, not +50 us
  clockid_t cpu_clock;
  if (::pthread_getcpuclockid(::pthread_self(), &cpu_clock) == 0) {
    cpu_clock_.store(cpu_clock);
    cpu_clock_valid_.store(true);
  }
  uint64_t seen_generation = ~uint64_t{0};
  int64_t armed_ns = -1;
  std::vector<uint8_t> scratch(max_frame_);
  epoll_event events[4];

  while (!stop_.load(std::memory_order_relaxed)) {
    const int n = ::epoll_wait(epoll_fd_, events, 4, -1);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      uint64_t drained;
      if (events[i].data.fd == timer_fd_) {
        (void)!::read(timer_fd_, &drained, sizeof drained);
        armed_ns = -1;
      } else if (events[i].data.fd == wake_fd_) {
        (void)!::read(wake_fd_, &drained, sizeof drained);
      }
    }
    const uint64_t generation = params_generation_.load();
    if (generation != seen_generation) {
      std::lock_guard<std::mutex> lock(mu_);
      shaper_.SetParams(pending_params_);
      seen_generation = generation;
    }

    TakeIn(&scratch);  // 1. what has arrived
    ReleaseDue();      // 2. what is due
    // 3. Sleep until the next departure (or the next arrival).
    if (const PacketRing::Entry* e = ring_.Front()) {
      const int64_t wake_ns = shaper_.WakeAt(e->release_ns);
      if (wake_ns != armed_ns) {
        itimerspec spec{};
        spec.it_value.tv_sec = wake_ns / 1'000'000'000;
        spec.it_value.tv_nsec = wake_ns % 1'000'000'000;
        ::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
        armed_ns = wake_ns;
      }
    }
  }
}

void Direction::TakeIn(std::vector<uint8_t>* scratch) {
  for (int i = 0; i < kReadBudget; ++i) {
    uint8_t* slot = ring_.Reserve(max_frame_);
    uint8_t* buf = slot != nullptr ? slot : scratch->data();
    const ssize_t len = ::read(in_fd_, buf, max_frame_);
    if (len <= 0) break;  // EAGAIN: nothing more for now
    const int64_t now = NowNs();
    const FrameInfo frame =
        InspectFrame(buf, static_cast<size_t>(len), max_frame_ - 1, super_packets_);
    rx_frames_.fetch_add(1, std::memory_order_relaxed);
    rx_packets_.fetch_add(frame.segments, std::memory_order_relaxed);
    rx_bytes_.fetch_add(frame.wire_bytes, std::memory_order_relaxed);
    if (!frame.ok) {  // truncated or unparsable: never forwarded as something else
      drop_malformed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (slot == nullptr) {
      drop_overflow_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    const Admission a = shaper_.Admit(now, frame.wire_bytes);
    switch (a.verdict) {
      case Verdict::kForward:
        ring_.Commit(static_cast<uint32_t>(len), a.release_ns);
        break;
      case Verdict::kDropBlackhole:
        drop_blackhole_.fetch_add(1, std::memory_order_relaxed);
        break;
      case Verdict::kDropLoss:
        drop_loss_.fetch_add(1, std::memory_order_relaxed);
        break;
      case Verdict::kDropQueue:
        drop_queue_.fetch_add(1, std::memory_order_relaxed);
        break;
    }
  }
}

void Direction::ReleaseDue() {
  // A blackhole also swallows packets already on the wire.
  const int64_t now = NowNs();
  while (const PacketRing::Entry* e = ring_.Front()) {
    if (e->release_ns > now) break;
    if (shaper_.BlackholedAt(now)) {
      drop_blackhole_.fetch_add(1, std::memory_order_relaxed);
    } else if (::write(out_fd_, e->data(), e->length) == static_cast<ssize_t>(e->length)) {
      const FrameInfo frame = InspectFrame(e->data(), e->length, e->length, super_packets_);
      tx_frames_.fetch_add(1, std::memory_order_relaxed);
      tx_packets_.fetch_add(frame.segments, std::memory_order_relaxed);
      tx_bytes_.fetch_add(frame.wire_bytes, std::memory_order_relaxed);
    } else {
      tx_errors_.fetch_add(1, std::memory_order_relaxed);
    }
    ring_.Pop();
  }
  queued_bytes_.store(ring_.used_bytes(), std::memory_order_relaxed);
}

}  // namespace wanem

// pipeline/work_queue.h: PopFor, the timed wait the snapshot's coordinator uses so that progress
// goes on while nothing arrives; SlotCounter, whose Close frees the workers of a stopped snapshot.
#include "pipeline/work_queue.h"

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

using wanbackup::pipeline::SlotCounter;
using wanbackup::pipeline::WorkQueue;
using namespace std::chrono_literals;

TEST_CASE("work queue: PopFor gives an item, times out on none, and ends on close", "[unit]") {
  WorkQueue<int> q;
  bool timed_out = true;
  q.Push(7);
  auto item = q.PopFor(1s, &timed_out);
  REQUIRE(item.has_value());
  CHECK(*item == 7);
  CHECK_FALSE(timed_out);

  item = q.PopFor(10ms, &timed_out);
  CHECK_FALSE(item.has_value());
  CHECK(timed_out);  // nothing came: the caller reports progress and waits again

  std::thread closer([&q] {
    std::this_thread::sleep_for(20ms);
    q.Close();
  });
  item = q.PopFor(60s, &timed_out);  // woken by Close, long before the minute
  closer.join();
  CHECK_FALSE(item.has_value());
  CHECK_FALSE(timed_out);  // closed and empty, as Pop's nullopt
}

TEST_CASE("slot counter: a waiter is woken by Close, and every Acquire after it is refused",
          "[unit]") {
  SlotCounter slots;
  slots.Release(1);
  CHECK(slots.Acquire());
  // No slot is free and none will be given back (a record nobody writes): only Close ends this.
  std::thread waiter([&slots] { CHECK_FALSE(slots.Acquire()); });
  std::this_thread::sleep_for(20ms);
  slots.Close();
  waiter.join();
  slots.Release(3);
  CHECK_FALSE(slots.Acquire());  // stopping: free slots or not
}

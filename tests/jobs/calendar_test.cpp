// Calendar schedules (jobs/calendar.h): parsing, the next elapse, the crontab form. Times are
// checked in UTC (TZ set for the test process) so they do not depend on the machine.
#include "jobs/calendar.h"

#include <cstdlib>
#include <ctime>

#include <catch2/catch.hpp>

namespace wanbackup::jobs {
namespace {

using Clock = std::chrono::system_clock;

struct UtcScope {
  UtcScope() {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
};

Clock::time_point Utc(int y, int mo, int d, int h, int mi, int s) {
  UtcScope utc;
  std::tm t{};
  t.tm_year = y - 1900;
  t.tm_mon = mo - 1;
  t.tm_mday = d;
  t.tm_hour = h;
  t.tm_min = mi;
  t.tm_sec = s;
  return Clock::from_time_t(::timegm(&t));
}

Clock::time_point Next(const std::string& spec, Clock::time_point after) {
  UtcScope utc;
  Result<CalendarSpec> parsed = ParseCalendar(spec);
  REQUIRE(parsed.ok());
  const auto next = NextElapse(*parsed, after);
  REQUIRE(next.has_value());
  return *next;
}

TEST_CASE("calendar: a daily time elapses today when still ahead, else tomorrow", "[calendar]") {
  CHECK(Next("*-*-* 01:30:00", Utc(2026, 11, 25, 0, 0, 0)) == Utc(2026, 11, 25, 1, 30, 0));
  CHECK(Next("*-*-* 01:30:00", Utc(2026, 11, 25, 1, 30, 0)) == Utc(2026, 11, 26, 1, 30, 0));
  CHECK(Next("01:30", Utc(2026, 12, 31, 12, 0, 0)) == Utc(2027, 1, 1, 1, 30, 0));
}

TEST_CASE("calendar: shorthands mean what systemd says", "[calendar]") {
  const auto t = Utc(2026, 11, 25, 10, 17, 42);  // a Wednesday
  CHECK(Next("minutely", t) == Utc(2026, 11, 25, 10, 18, 0));
  CHECK(Next("hourly", t) == Utc(2026, 11, 25, 11, 0, 0));
  CHECK(Next("daily", t) == Utc(2026, 11, 26, 0, 0, 0));
  CHECK(Next("weekly", t) == Utc(2026, 11, 30, 0, 0, 0));
  CHECK(Next("monthly", t) == Utc(2026, 12, 1, 0, 0, 0));
  CHECK(Next("quarterly", t) == Utc(2027, 1, 1, 0, 0, 0));
  CHECK(Next("yearly", t) == Utc(2027, 1, 1, 0, 0, 0));
}

TEST_CASE("calendar: weekdays, lists, ranges and repetitions combine", "[calendar]") {
  const auto wednesday = Utc(2026, 11, 25, 23, 0, 0);
  CHECK(Next("Mon..Fri 22:00", wednesday) == Utc(2026, 11, 26, 22, 0, 0));
  CHECK(Next("Sat,Sun 03:00", wednesday) == Utc(2026, 11, 28, 3, 0, 0));
  // The first Saturday of a month.
  CHECK(Next("Sat *-*-1..7 03:00", wednesday) == Utc(2026, 12, 5, 3, 0, 0));
  CHECK(Next("*-*-* 00/6:00", wednesday) == Utc(2026, 11, 26, 0, 0, 0));
  CHECK(Next("*-*-* 8..18/2:15", Utc(2026, 11, 25, 9, 0, 0)) == Utc(2026, 11, 25, 10, 15, 0));
  CHECK(Next("*-02-29 12:00", wednesday) == Utc(2028, 2, 29, 12, 0, 0));
  CHECK(Next("2027-06-01", wednesday) == Utc(2027, 6, 1, 0, 0, 0));
}

TEST_CASE("calendar: what it cannot read is refused with the reason", "[calendar]") {
  for (const char* bad : {"", "tomorrow", "*-*-* 25:00", "*-13-01", "Mon..Xyz 10:00",
                          "*-*-* 01:30 Europe/Paris", "*-*~01", "*-*-* 01:30:00.5", "*/0:00"}) {
    INFO(bad);
    CHECK_FALSE(ParseCalendar(bad).ok());
  }
  Result<CalendarSpec> zone = ParseCalendar("*-*-* 01:30 UTC");
  REQUIRE_FALSE(zone.ok());
  CHECK(zone.status().message().find("time zones") != std::string::npos);
}

TEST_CASE("calendar: a date that never comes has no next elapse", "[calendar]") {
  Result<CalendarSpec> never = ParseCalendar("*-02-30 00:00");
  REQUIRE(never.ok());
  CHECK_FALSE(NextElapse(*never, Clock::now()).has_value());
  Result<CalendarSpec> past = ParseCalendar("2001-01-01");
  REQUIRE(past.ok());
  CHECK_FALSE(NextElapse(*past, Clock::now()).has_value());
}

TEST_CASE("calendar: cron fields where cron can say it, a reason where it cannot", "[calendar]") {
  auto cron = [](const char* spec) {
    Result<CalendarSpec> parsed = ParseCalendar(spec);
    REQUIRE(parsed.ok());
    return CronFields(*parsed);
  };
  CHECK(*cron("*-*-* 01:30:00") == "30 1 * * *");
  CHECK(*cron("Mon..Fri 22:00") == "0 22 * * 1,2,3,4,5");
  CHECK(*cron("Sun 03:15") == "15 3 * * 0");
  CHECK(*cron("*-01,07-01 00:00") == "0 0 1 1,7 *");
  CHECK(*cron("hourly") == "0 * * * *");
  CHECK_FALSE(cron("*-*-* 01:30:15").ok());
  CHECK_FALSE(cron("2027-*-* 01:30").ok());
  CHECK_FALSE(cron("Sat *-*-1..7 03:00").ok());
}

}  // namespace
}  // namespace wanbackup::jobs

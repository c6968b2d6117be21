// Calendar schedules, as a job's `schedule` key and systemd's OnCalendar= write them
// (systemd.time(7), "Calendar Events"), and when one next elapses. Pure functions; thread-safe.
//
// The subset wanbackup accepts (everything else is refused with the reason, never guessed):
//   [WEEKDAYS] [DATE] [TIME]   e.g. "*-*-* 01:30:00", "Mon..Fri 22:00", "Sat *-*-1..7 03:00"
//   WEEKDAYS  Mon, Tue, ... (or Monday ...), as lists "Mon,Wed" and ranges "Mon..Fri"
//   DATE      [YEAR-]MONTH-DAY; TIME  HOUR:MINUTE[:SECOND] (seconds default to 00)
//   each number field: "*", N, lists "1,15", ranges "1..7", repetitions "*/2", "0/15", "8..18/2"
//   shorthands: minutely, hourly, daily, weekly, monthly, quarterly, semiannually, yearly
//   (annually); a missing date is every day, a missing time is midnight.
// Not accepted: time zones (schedules are in the machine's local time, as cron's), "~" (days
// from the end of the month), fractional seconds.
#pragma once

#include <bitset>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace wanbackup::jobs {

struct CalendarSpec {
  std::string text;         // as written
  std::bitset<7> weekdays;  // bit 0 = Monday ... 6 = Sunday
  std::bitset<200> years;   // bit i = year 2000 + i; all set for "*"
  std::bitset<13> months;   // bits 1..12
  std::bitset<32> days;     // bits 1..31
  std::bitset<24> hours;
  std::bitset<60> minutes;
  std::bitset<60> seconds;
  bool any_weekday = true;  // for cron: was the field left out / "*"
  bool any_year = true;
  bool any_month = true;
  bool any_day = true;
};

Result<CalendarSpec> ParseCalendar(std::string_view text);

// The first time strictly after `after` that the schedule names, in local time; nullopt when
// none falls within the next 200 years' span the spec can name (e.g. "2001-*-*").
std::optional<std::chrono::system_clock::time_point> NextElapse(
    const CalendarSpec& spec, std::chrono::system_clock::time_point after);

// The five time fields of a crontab line ("30 1 * * *"), or Unsupported with the reason when
// cron cannot say it (seconds other than 0, a year, or both days of the month and weekdays —
// cron ORs those where systemd ANDs them).
Result<std::string> CronFields(const CalendarSpec& spec);

}  // namespace wanbackup::jobs

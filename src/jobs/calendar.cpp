#include "jobs/calendar.h"

#include <cctype>
#include <ctime>
#include <vector>

namespace wanbackup::jobs {
namespace {

constexpr int kFirstYear = 2000;
constexpr int kLastYear = kFirstYear + 199;
constexpr const char* kWeekdayNames[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
constexpr const char* kWeekdayLongNames[] = {"monday", "tuesday",  "wednesday", "thursday",
                                             "friday", "saturday", "sunday"};

struct Shorthand {
  const char* name;
  const char* expansion;
};
constexpr Shorthand kShorthands[] = {
    {"minutely", "*-*-* *:*:00"},
    {"hourly", "*-*-* *:00:00"},
    {"daily", "*-*-* 00:00:00"},
    {"weekly", "Mon *-*-* 00:00:00"},
    {"monthly", "*-*-01 00:00:00"},
    {"quarterly", "*-01,04,07,10-01 00:00:00"},
    {"semiannually", "*-01,07-01 00:00:00"},
    {"yearly", "*-01-01 00:00:00"},
    {"annually", "*-01-01 00:00:00"},
};

std::vector<std::string_view> Split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find_first_of(separators, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  for (std::string_view w : Split(text, " \t"))
    if (!w.empty()) words.push_back(w);
  return words;
}

bool Number(std::string_view text, int* value) {
  if (text.empty() || text.size() > 4) return false;
  int v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  *value = v;
  return true;
}

// One field ("*", "1,15", "1..7", "*/2", "8..18/2") into out[lo..hi].
Status ParseField(std::string_view field, const char* what, int lo, int hi, std::vector<bool>* out,
                  bool* any) {
  out->assign(static_cast<size_t>(hi) + 1, false);
  *any = field == "*";
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(what) + " '" + std::string(field) + "': " + why);
  };
  for (std::string_view item : Split(field, ",")) {
    int step = 0;
    std::string_view range = item;
    if (const size_t slash = item.find('/'); slash != std::string_view::npos) {
      if (!Number(item.substr(slash + 1), &step) || step < 1) return bad("bad repetition");
      range = item.substr(0, slash);
    }
    int first = lo, last = hi;
    if (range != "*") {
      const size_t dots = range.find("..");
      const bool ok = dots == std::string_view::npos ? Number(range, &first)
                                                     : Number(range.substr(0, dots), &first) &&
                                                           Number(range.substr(dots + 2), &last);
      if (!ok) {
        return bad(range.find('~') != std::string_view::npos
                       ? "'~' (days from the end of the month) is not supported"
                       : "expected *, a number, a list (1,15), a range (1..7) or a "
                         "repetition (*/2)");
      }
      if (dots == std::string_view::npos && step == 0) last = first;
    }
    if (first < lo || last > hi || first > last) {
      return bad("out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
    }
    for (int v = first; v <= last; v += step == 0 ? 1 : step)
      (*out)[static_cast<size_t>(v)] = true;
  }
  return Status::Ok();
}

template <size_t N>
Status ParseInto(std::string_view field, const char* what, int lo, int hi, std::bitset<N>* bits,
                 bool* any, int offset = 0) {
  std::vector<bool> values;
  bool any_value = false;
  WB_RETURN_IF_ERROR(ParseField(field, what, lo, hi, &values, &any_value));
  bits->reset();
  for (int v = lo; v <= hi; ++v)
    if (values[static_cast<size_t>(v)]) bits->set(static_cast<size_t>(v - offset));
  if (any != nullptr) *any = any_value;
  return Status::Ok();
}

int WeekdayIndex(std::string_view name) {
  std::string lower;
  for (char c : name)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int i = 0; i < 7; ++i) {
    if (lower == kWeekdayNames[i] || lower == kWeekdayLongNames[i]) return i;
  }
  return -1;
}

Status ParseWeekdays(std::string_view field, CalendarSpec* spec) {
  spec->weekdays.reset();
  spec->any_weekday = false;
  for (std::string_view item : Split(field, ",")) {
    const size_t dots = item.find("..");
    const int first = WeekdayIndex(item.substr(0, dots));
    const int last = dots == std::string_view::npos ? first : WeekdayIndex(item.substr(dots + 2));
    if (first < 0 || last < 0 || first > last) {
      return Status::InvalidArgument("weekdays '" + std::string(field) +
                                     "': expected names as Mon, Mon,Wed or Mon..Fri");
    }
    for (int d = first; d <= last; ++d)
      spec->weekdays.set(static_cast<size_t>(d));
  }
  return Status::Ok();
}

Status ParseDate(std::string_view token, CalendarSpec* spec) {
  const std::vector<std::string_view> parts = Split(token, "-");
  if (parts.size() != 2 && parts.size() != 3) {
    return Status::InvalidArgument("date '" + std::string(token) + "': expected [YEAR-]MONTH-DAY");
  }
  const size_t m = parts.size() - 2;
  if (parts.size() == 3) {
    WB_RETURN_IF_ERROR(ParseInto(parts[0], "year", kFirstYear, kLastYear, &spec->years,
                                 &spec->any_year, kFirstYear));
  }
  WB_RETURN_IF_ERROR(ParseInto(parts[m], "month", 1, 12, &spec->months, &spec->any_month));
  return ParseInto(parts[m + 1], "day", 1, 31, &spec->days, &spec->any_day);
}

Status ParseTime(std::string_view token, CalendarSpec* spec) {
  const std::vector<std::string_view> parts = Split(token, ":");
  if (parts.size() != 2 && parts.size() != 3) {
    return Status::InvalidArgument("time '" + std::string(token) +
                                   "': expected HOUR:MINUTE[:SECOND]");
  }
  if (parts.size() == 3 && parts[2].find('.') != std::string_view::npos) {
    return Status::InvalidArgument("time '" + std::string(token) +
                                   "': fractional seconds are not supported");
  }
  WB_RETURN_IF_ERROR(ParseInto(parts[0], "hour", 0, 23, &spec->hours, nullptr));
  WB_RETURN_IF_ERROR(ParseInto(parts[1], "minute", 0, 59, &spec->minutes, nullptr));
  return ParseInto(parts.size() == 3 ? parts[2] : "00", "second", 0, 59, &spec->seconds, nullptr);
}

Status ParseWords(const std::vector<std::string_view>& words, CalendarSpec* spec) {
  size_t i = 0;
  if (i < words.size() && std::isalpha(static_cast<unsigned char>(words[i][0]))) {
    WB_RETURN_IF_ERROR(ParseWeekdays(words[i++], spec));
  }
  if (i < words.size() && words[i].find(':') == std::string_view::npos &&
      words[i].find('-') != std::string_view::npos) {
    WB_RETURN_IF_ERROR(ParseDate(words[i++], spec));
  }
  if (i < words.size() && words[i].find(':') != std::string_view::npos) {
    WB_RETURN_IF_ERROR(ParseTime(words[i++], spec));
  }
  if (i < words.size()) {
    return Status::InvalidArgument(
        "unexpected '" + std::string(words[i]) +
        "' (expected [WEEKDAYS] [YEAR-MONTH-DAY] [HH:MM[:SS]]; time zones are not supported, "
        "schedules are in local time)");
  }
  return Status::Ok();
}

bool DayMatches(const CalendarSpec& spec, const std::tm& day) {
  const int year = day.tm_year + 1900;
  if (year < kFirstYear || year > kLastYear) return false;
  const int month = day.tm_mon + 1;
  return spec.years.test(static_cast<size_t>(year - kFirstYear)) &&
         spec.months.test(static_cast<size_t>(month)) &&
         spec.days.test(static_cast<size_t>(day.tm_mday)) &&
         spec.weekdays.test(static_cast<size_t>((day.tm_wday + 6) % 7));
}

template <size_t N>
std::string CronList(const std::bitset<N>& bits, size_t lo, size_t hi) {
  bool all = true;
  for (size_t i = lo; i <= hi; ++i)
    all = all && bits.test(i);
  if (all) return "*";
  std::string list;
  for (size_t i = lo; i <= hi; ++i) {
    if (bits.test(i)) list += (list.empty() ? "" : ",") + std::to_string(i);
  }
  return list;
}

}  // namespace

Result<CalendarSpec> ParseCalendar(std::string_view text) {
  CalendarSpec spec;
  spec.text = std::string(text);
  spec.weekdays.set();
  spec.years.set();
  spec.months.set();
  spec.months.reset(0);
  spec.days.set();
  spec.days.reset(0);
  spec.hours.reset();
  spec.hours.set(0);
  spec.minutes.reset();
  spec.minutes.set(0);
  spec.seconds.reset();
  spec.seconds.set(0);
  std::string_view expanded = text;
  for (const Shorthand& s : kShorthands) {
    if (text == s.name) expanded = s.expansion;
  }
  const std::vector<std::string_view> words = Words(expanded);
  if (words.empty()) return Status::InvalidArgument("schedule is empty");
  if (Status s = ParseWords(words, &spec); !s.ok()) {
    return Status::InvalidArgument("schedule '" + spec.text + "': " + s.message());
  }
  return spec;
}

std::optional<std::chrono::system_clock::time_point> NextElapse(
    const CalendarSpec& spec, std::chrono::system_clock::time_point after) {
  using std::chrono::system_clock;
  const std::time_t start = system_clock::to_time_t(after) + 1;
  std::tm now{};
  localtime_r(&start, &now);
  const int first_second = now.tm_hour * 3600 + now.tm_min * 60 + now.tm_sec;
  for (int offset = 0;; ++offset) {
    std::tm day{};
    day.tm_year = now.tm_year;
    day.tm_mon = now.tm_mon;
    day.tm_mday = now.tm_mday + offset;
    day.tm_hour = 12;
    day.tm_isdst = -1;
    if (std::mktime(&day) == -1 || day.tm_year + 1900 > kLastYear) return std::nullopt;
    if (!DayMatches(spec, day)) continue;
    for (int h = 0; h < 24; ++h) {
      for (int m = 0; m < 60; ++m) {
        for (int s = 0; s < 60; ++s) {
          if (!spec.hours.test(static_cast<size_t>(h)) ||
              !spec.minutes.test(static_cast<size_t>(m)) ||
              !spec.seconds.test(static_cast<size_t>(s)))
            continue;
          if (offset == 0 && h * 3600 + m * 60 + s < first_second) continue;
          std::tm at = day;
          at.tm_hour = h;
          at.tm_min = m;
          at.tm_sec = s;
          at.tm_isdst = -1;
          const std::time_t t = std::mktime(&at);
          if (t >= start) return system_clock::from_time_t(t);
        }
      }
    }
  }
}

Result<std::string> CronFields(const CalendarSpec& spec) {
  const std::string why = "schedule '" + spec.text + "' cannot be written as a crontab line: ";
  if (spec.seconds.count() != 1 || !spec.seconds.test(0)) {
    return Status::Unsupported(why + "cron runs on whole minutes only");
  }
  if (!spec.any_year) return Status::Unsupported(why + "cron has no year field");
  const bool weekdays = spec.weekdays.count() != 7;
  if (weekdays && !spec.any_day) {
    return Status::Unsupported(why +
                               "with both days of the month and weekdays, cron runs on either "
                               "where systemd needs both; use the systemd timer");
  }
  std::bitset<7> cron_days;  // cron: 0 = Sunday
  for (size_t d = 0; d < 7; ++d)
    if (spec.weekdays.test(d)) cron_days.set((d + 1) % 7);
  return CronList(spec.minutes, 0, 59) + " " + CronList(spec.hours, 0, 23) + " " +
         CronList(spec.days, 1, 31) + " " + CronList(spec.months, 1, 12) + " " +
         CronList(cron_days, 0, 6);
}

}  // namespace wanbackup::jobs

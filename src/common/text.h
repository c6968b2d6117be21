// Text that users give (tags, paths) and that the repository records as JSON, which must be
// UTF-8. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace wanbackup {

// Well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
bool IsUtf8(std::string_view text);

// Characters (code points) in UTF-8 text, for padding table columns; a byte that starts no
// character is not counted.
size_t CodePoints(std::string_view text);

// `text` padded with spaces to `columns` characters (as CodePoints counts them).
std::string PadRight(std::string_view text, size_t columns);

// The first character in well-formed UTF-8 `text` that shows as nothing or acts on a terminal:
// C1 controls and Unicode's default-ignorable code points (zero-width spaces and joiners, the
// soft hyphen, bidirectional marks, overrides and isolates, variation selectors, the byte order
// mark, tag characters), the other format characters, noncharacters, private-use characters and
// the blank Braille pattern. Names with one look like other names (round 9, Z6).
std::optional<uint32_t> FirstInvisibleCharacter(std::string_view text);

// Whether well-formed UTF-8 `text` begins or ends with white space (ASCII or Unicode's spaces,
// U+00A0 and U+3000 included).
bool HasEdgeSpace(std::string_view text);

// One word for sh: as it is when it holds only characters sh gives no meaning, else in single
// quotes (a quote inside as '\''). For generated command lines and the commands messages advise.
std::string ShellWord(const std::string& word);

// A counter as the repository's files write it: decimal digits only (no sign, no space, no
// prefix), within uint64_t. nullopt otherwise (strtoull would accept "+1", " 1" and wrap).
std::optional<uint64_t> ParseDecimalU64(std::string_view text);

// `value` with each control character (below 0x20, and 0x7f) as \xNN, for messages that quote
// text someone else wrote (a lock holder line, a trust anchor's line).
std::string EscapeControl(const std::string& value);

// `text` as a terminal may show it: control characters and bytes that are not UTF-8 as \xNN,
// and characters a terminal acts on (C1 controls, bidirectional overrides and isolates, line
// and paragraph separators) as \uNNNN; everything else as it is. For the human output of names
// someone else chose (sources, tags), and every message line.
std::string EscapeForTerminal(std::string_view text);

}  // namespace wanbackup

// config.json's text: writing it, and its authentication code (docs/format.md, "config.json").
// Parsing is public (ParseRepositoryConfig, repository.h). Pure functions; thread-safe.
#pragma once

#include <string>

#include "repository/keys.h"
#include "repository/repository.h"

namespace wanbackup::pipeline::internal {

// The file's canonical text (format, id, chunking, compression, encryption, and the
// authentication code when it has one).
std::string ConfigJson(const RepositoryConfig& c);
// The authentication code of config.json: keyed over its canonical text without the code.
std::string Authenticate(RepositoryConfig c, const KeySet& keys);
// Whether config.json's `authentication` (hex) is the code of its settings.
bool Authentic(const RepositoryConfig& c, const KeySet& keys);

}  // namespace wanbackup::pipeline::internal

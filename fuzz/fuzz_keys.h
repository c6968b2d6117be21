// The fixed keys the fuzz targets and their seeds share, so seeds made by make_seeds.cpp are
// records the targets can open. Test keys only: never a repository's.
#pragma once

#include "repository/keys.h"

namespace wanbackup::fuzz {

inline const char kRepositoryId[] = "00112233445566778899aabbccddeeff";

inline pipeline::KeySet EncryptedKeys() {
  pipeline::SecureKey master;
  for (size_t i = 0; i < master.size(); ++i)
    master.mutable_data()[i] = static_cast<uint8_t>(i * 7 + 1);
  master.Seal();
  return pipeline::KeySet(master);
}

}  // namespace wanbackup::fuzz

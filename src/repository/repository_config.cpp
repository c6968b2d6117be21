#include <nlohmann/json.hpp>
#include <sodium.h>

#include "repository/internal/config_json.h"
#include "repository/internal/json_fields.h"
#include "repository/repository.h"

namespace wanbackup::pipeline {
namespace internal {

std::string ConfigJson(const RepositoryConfig& c) {
  nlohmann::json enc = {{"mode", EncryptionModeName(c.mode)}};
  if (c.mode != EncryptionMode::kNone) {
    enc["cipher"] = "xchacha20poly1305-ietf";
    enc["digest"] = "blake2b-256-keyed";
    enc["wrapped_key"] = c.wrapped_key;
  }
  if (c.mode == EncryptionMode::kPassphrase) {
    enc["kdf"] = {{"algorithm", "argon2id13"},
                  {"opslimit", c.kdf.opslimit},
                  {"memlimit", c.kdf.memlimit},
                  {"salt", ToHex(c.kdf.salt.data(), c.kdf.salt.size())}};
  }
  nlohmann::json j = {{"format", c.format},
                      {"repository_id", c.id},
                      {"created", c.created},
                      {"chunk_size", c.chunk_size},
                      {"compression", {{"algorithm", "zstd"}, {"level", c.zstd_level}}},
                      {"encryption", enc}};
  if (!c.authentication.empty()) j["authentication"] = c.authentication;
  return j.dump(2) + "\n";
}

// The authentication code of config.json: keyed over its canonical text without the code.
std::string Authenticate(RepositoryConfig c, const KeySet& keys) {
  c.authentication.clear();
  const Digest mac = keys.ConfigMac(ConfigJson(c));
  return ToHex(mac.data(), mac.size());
}

// Whether config.json's `authentication` (hex) is the code of its settings: the bytes compared
// in constant time (a string comparison stops at the first wrong digit, telling a forger how far
// they got).
bool Authentic(const RepositoryConfig& c, const KeySet& keys) {
  Digest claimed{};
  if (!FromHex(c.authentication, claimed.data(), claimed.size())) return false;
  RepositoryConfig bare = c;
  bare.authentication.clear();
  const Digest mac = keys.ConfigMac(ConfigJson(bare));
  return sodium_memcmp(mac.data(), claimed.data(), mac.size()) == 0;
}

}  // namespace internal

Result<RepositoryConfig> ParseRepositoryConfig(const std::string& text, const std::string& path) {
  RepositoryConfig c;
  try {
    const auto j = nlohmann::json::parse(text);
    c.format = internal::IntField<int>(j, "format");
    if (c.format < 1 || c.format > kRepositoryFormat) {
      return Status::Unsupported(path + ": repository format " + std::to_string(c.format) +
                                 " is not supported by this wanbackup");
    }
    c.id = j.at("repository_id").get<std::string>();
    c.created = j.value("created", "");
    c.chunk_size = internal::IntField<uint32_t>(j, "chunk_size");
    c.zstd_level = internal::IntField<int>(j.at("compression"), "level");
    const auto& enc = j.at("encryption");
    const std::string mode = enc.at("mode").get<std::string>();
    if (mode == "passphrase") {
      c.mode = EncryptionMode::kPassphrase;
      const auto& kdf = enc.at("kdf");
      c.kdf.opslimit = internal::IntField<uint64_t>(kdf, "opslimit");
      c.kdf.memlimit = internal::IntField<uint64_t>(kdf, "memlimit");
      if (!FromHex(kdf.at("salt").get<std::string>(), c.kdf.salt.data(), c.kdf.salt.size())) {
        return Status::Corruption(path + ": bad KDF salt");
      }
      if (Status k = CheckKdfParams(c.kdf); !k.ok()) {
        return Status::Corruption(path + ": " + k.message() + " (the file was altered)");
      }
    } else if (mode == "keyfile") {
      c.mode = EncryptionMode::kKeyFile;
    } else if (mode == "none") {
      c.mode = EncryptionMode::kNone;
    } else {
      return Status::Unsupported(path + ": unknown encryption mode '" + mode + "'");
    }
    if (c.mode != EncryptionMode::kNone) c.wrapped_key = enc.at("wrapped_key").get<std::string>();
    if (c.format >= 2) c.authentication = j.at("authentication").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(path + " is damaged: " + e.what());
  } catch (const internal::JsonFieldError& e) {
    return Status::Corruption(path + " is damaged: " + e.what());
  }
  uint8_t id[16];
  if (!FromHex(c.id, id, sizeof id)) return Status::Corruption(path + ": bad repository id");
  if (c.chunk_size < (64u << 10) || c.chunk_size > (64u << 20) ||
      (c.chunk_size & (c.chunk_size - 1)) != 0) {
    return Status::Corruption(path + ": chunk size " + std::to_string(c.chunk_size) +
                              " is out of range");
  }
  if (c.zstd_level < 0 || c.zstd_level > 19) {
    return Status::Corruption(path + ": compression level " + std::to_string(c.zstd_level) +
                              " is out of range");
  }
  return c;
}

const char* EncryptionModeName(EncryptionMode mode) {
  switch (mode) {
    case EncryptionMode::kPassphrase:
      return "passphrase";
    case EncryptionMode::kKeyFile:
      return "keyfile";
    case EncryptionMode::kNone:
      return "none";
  }
  return "none";
}

}  // namespace wanbackup::pipeline

#include "cli/source_open.h"

#include <filesystem>

#include "common/pacing.h"
#include "common/units.h"
#include "initiator/iscsi_source.h"
#include "pipeline/file_source.h"

namespace wanbackup::cli {

namespace {

Result<OpenedSource> OpenUnpaced(const std::string& spec, const TargetFlags& target,
                                 const TuningFlags& tuning, SourceUse use) {
  OpenedSource opened;
  if (!initiator::LooksLikeIscsiUrl(spec)) {
    if (spec.find("://") != std::string::npos) {
      return Status::InvalidArgument("'" + spec +
                                     "': only iscsi:// URLs and local paths are "
                                     "supported");
    }
    WB_ASSIGN_OR_RETURN(opened.source, pipeline::FileSource::Open(AbsoluteLocalPath(spec)));
    return opened;
  }
  WB_ASSIGN_OR_RETURN(initiator::IscsiUrl url, initiator::ParseLunUrl(spec));
  initiator::IscsiSourceOptions options;
  options.lun = *url.lun;
  WB_ASSIGN_OR_RETURN(options.connection, BuildConnectionOptions(std::move(url), target));
  WB_RETURN_IF_ERROR(ApplyTuningFlags(tuning, &options));
  options.query_deallocated = use == SourceUse::kData;
  WB_ASSIGN_OR_RETURN(std::unique_ptr<initiator::IscsiSource> source,
                      initiator::IscsiSource::Open(std::move(options)));
  opened.tuning_explanation = source->plan().explanation;
  opened.remote = true;
  opened.source = std::move(source);
  return opened;
}

}  // namespace

std::string AbsoluteLocalPath(const std::string& spec) {
  if (spec.empty() || spec == "-" || initiator::LooksLikeIscsiUrl(spec) ||
      spec.find("://") != std::string::npos) {
    return spec;
  }
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(spec, ec);
  if (ec) return spec;
  // "a/../b" names b only when a is no symlink: keep ".." for the kernel to resolve.
  for (const auto& part : absolute) {
    if (part == "..") return absolute.string();
  }
  return absolute.lexically_normal().string();
}

Result<OpenedSource> OpenSource(const std::string& spec, const TargetFlags& target,
                                const TuningFlags& tuning, SourceUse use) {
  // Checked before anything connects: a bad value must not cost a login.
  WB_ASSIGN_OR_RETURN(const uint64_t rate, LimitRate(tuning));
  WB_ASSIGN_OR_RETURN(OpenedSource opened, OpenUnpaced(spec, target, tuning, use));
  if (rate > 0) {
    if (!opened.tuning_explanation.empty()) {
      opened.tuning_explanation += "; the average held to " + FormatRate(static_cast<double>(rate));
    }
    opened.source =
        std::make_unique<PacedSource>(std::move(opened.source), std::make_shared<Pacer>(rate));
  }
  return opened;
}

}  // namespace wanbackup::cli

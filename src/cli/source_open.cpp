#include "cli/source_open.h"

#include "initiator/iscsi_source.h"
#include "pipeline/file_source.h"

namespace wanbackup::cli {

Result<OpenedSource> OpenSource(const std::string& spec, const TargetFlags& target,
                                const TuningFlags& tuning) {
  OpenedSource opened;
  if (!initiator::LooksLikeIscsiUrl(spec)) {
    if (spec.find("://") != std::string::npos) {
      return Status::InvalidArgument("'" + spec +
                                     "': only iscsi:// URLs and local paths are "
                                     "supported");
    }
    WB_ASSIGN_OR_RETURN(opened.source, pipeline::FileSource::Open(spec));
    return opened;
  }
  WB_ASSIGN_OR_RETURN(initiator::IscsiUrl url, initiator::ParseIscsiUrl(spec));
  if (url.target.empty() || !url.lun) {
    return Status::InvalidArgument("'" + url.ToDisplayString() +
                                   "' names no LUN: use iscsi://host[:port]/target-iqn/lun "
                                   "(wanbackup probe lists them)");
  }
  initiator::IscsiSourceOptions options;
  options.lun = *url.lun;
  WB_ASSIGN_OR_RETURN(options.connection, BuildConnectionOptions(std::move(url), target));
  WB_RETURN_IF_ERROR(ApplyTuningFlags(tuning, &options));
  WB_ASSIGN_OR_RETURN(std::unique_ptr<initiator::IscsiSource> source,
                      initiator::IscsiSource::Open(std::move(options)));
  opened.tuning_explanation = source->plan().explanation;
  opened.remote = true;
  opened.source = std::move(source);
  return opened;
}

}  // namespace wanbackup::cli

#include "cli/sink_open.h"

#include "cli/console.h"
#include "initiator/iscsi_url.h"
#include "pipeline/file_sink.h"

namespace wanbackup::cli {

Result<OpenedSink> OpenSink(const std::string& spec, uint64_t image_size, ExistingFile existing,
                            const TargetFlags& target, const TuningFlags& tuning) {
  OpenedSink opened;
  if (!initiator::LooksLikeIscsiUrl(spec)) {
    pipeline::FileSinkOptions options;
    options.overwrite = existing == ExistingFile::kReplace;
    options.in_place = existing == ExistingFile::kInPlace;
    options.expected_size = image_size;
    WB_ASSIGN_OR_RETURN(std::unique_ptr<pipeline::FileSink> file,
                        pipeline::FileSink::Open(spec, options));
    opened.created = file->created();
    if (!file->notice().empty()) PrintWarning(file->notice());
    opened.sink = std::move(file);
    return opened;
  }
  WB_ASSIGN_OR_RETURN(initiator::IscsiUrl url, initiator::ParseLunUrl(spec));
  initiator::IscsiSinkOptions options;
  options.lun = *url.lun;
  options.image_size = image_size;
  WB_ASSIGN_OR_RETURN(options.connection, BuildConnectionOptions(std::move(url), target));
  initiator::IscsiSourceOptions tuned;  // the same flags as for reading
  WB_RETURN_IF_ERROR(ApplyTuningFlags(tuning, &tuned));
  options.tuning = tuned.tuning;
  options.retry_timeout = tuned.retry_timeout;
  options.connection.congestion_control = tuned.connection.congestion_control;
  WB_ASSIGN_OR_RETURN(std::unique_ptr<initiator::IscsiSink> sink,
                      initiator::IscsiSink::Open(std::move(options)));
  opened.tuning_explanation = sink->plan().explanation;
  opened.lun = sink.get();
  opened.sink = std::move(sink);
  return opened;
}

}  // namespace wanbackup::cli

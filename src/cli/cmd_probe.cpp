// wanbackup probe URL: log in to a target and describe it.
#include <algorithm>
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/console.h"
#include "cli/internal/json_text.h"
#include "cli/target_flags.h"
#include "cli/tuning_flags.h"
#include "common/units.h"
#include "initiator/autotune.h"
#include "initiator/probe.h"

namespace wanbackup::cli {
namespace {

struct ProbeCommandOptions {
  std::string url;
  bool json = false;
  std::string rate_test = "3s";
  TargetFlags target;
  TuningFlags tuning;
};

std::string RecommendedFlags(const initiator::RateTest& r) {
  const std::string io = r.io_size % (1 << 20) == 0 ? std::to_string(r.io_size >> 20) + "M"
                                                    : std::to_string(r.io_size >> 10) + "K";
  return "--connections " + std::to_string(r.connections) + " --queue-depth " +
         std::to_string(r.queue_depth) + " --io-size " + io;
}

double Millis(std::chrono::nanoseconds d) {
  return static_cast<double>(d.count()) / 1e6;
}

const char* ProvisioningTypeName(int type) {
  switch (type) {
    case 1:
      return "resource";
    case 2:
      return "thin";
    default:
      return "full";
  }
}

// "thin, deallocated reads zero, 12.8 MiB mapped" for a thin LUN; "full" otherwise.
std::string ProvisioningText(const initiator::LunInfo& lun) {
  if (!lun.thin_provisioned) return "full";
  std::string text = "thin";
  text += lun.unmapped_reads_zero ? ", deallocated reads zero" : ", deallocated undefined";
  text += ", mapped " + (lun.mapped_bytes ? FormatBytes(*lun.mapped_bytes) + " (" +
                                                std::to_string(*lun.mapped_bytes) + " B)"
                                          : std::string("unknown"));
  return text;
}

nlohmann::json LunJson(const initiator::LunInfo& lun) {
  nlohmann::json j = {{"lun", lun.lun},
                      {"type", lun.device_type},
                      {"vendor", lun.vendor},
                      {"product", lun.product},
                      {"revision", lun.revision},
                      {"serial", lun.serial},
                      {"identifier", lun.identifier}};
  if (lun.is_disk()) {
    j["size_bytes"] = lun.size_bytes();
    j["block_count"] = lun.block_count;
    j["block_size"] = lun.block_size;
    j["physical_block_size"] = lun.physical_block_size;
    j["thin_provisioned"] = lun.thin_provisioned;
    j["unmapped_reads_zero"] = lun.unmapped_reads_zero;
    j["write_protected"] = lun.write_protected;  // MODE SENSE: restore, copy, replicate refuse it
    // GET LBA STATUS's sum for a thin LUN; null when it is not thin or the target refused.
    j["mapped_bytes"] = lun.mapped_bytes ? nlohmann::json(*lun.mapped_bytes) : nlohmann::json();
    nlohmann::json page;  // null: the LUN has no Logical Block Provisioning page
    if (lun.has_provisioning_page) {
      page = {{"unmap", lun.unmap_supported},
              {"write_same_unmap", lun.write_same_unmap_supported},
              {"unmapped_reads_zero", lun.page_unmapped_reads_zero},
              {"provisioning_type", ProvisioningTypeName(lun.provisioning_type)}};
    }
    j["provisioning_page"] = page;
    j["max_transfer_bytes"] = uint64_t{lun.max_transfer_blocks} * lun.block_size;
    j["optimal_transfer_bytes"] = uint64_t{lun.optimal_transfer_blocks} * lun.block_size;
    j["max_write_same_bytes"] = lun.max_write_same_blocks * lun.block_size;  // 0: not reported
  }
  return j;
}

// The size of the WRITEs restore, replicate and copy would send to this target under
// `negotiated`: autotune's (PlanWrite), with the probe's tuning flags and the first disk LUN's
// limits.
uint64_t WriteBytes(const initiator::ProbedTarget& t, initiator::TuningRequest request,
                    const initiator::NegotiatedParams& negotiated) {
  request.rtt = t.rtt;
  for (const auto& lun : t.luns) {
    if (!lun.is_disk()) continue;
    request.block_size = lun.block_size;
    request.lun_size = lun.size_bytes();
    request.max_transfer_bytes = uint64_t{lun.max_transfer_blocks} * lun.block_size;
    break;
  }
  return initiator::PlanWrite(request, negotiated).io_size;
}

// "WRITEs of 264.00 KiB: 2 round trips per WRITE (...)", and when the target could allow keys
// that would make it one, those (docs/operations.md, "Writing to a LUN across a WAN").
std::string WritesText(const initiator::ProbedTarget& t, const initiator::TuningRequest& tuning) {
  const initiator::NegotiatedParams& n = t.negotiated;
  const uint64_t bytes = WriteBytes(t, tuning, n);
  std::string text =
      "WRITEs of " + FormatBytes(bytes) + ": " + initiator::DescribeWriteCost(bytes, n);
  if (initiator::WriteRoundTrips(bytes, n) == 1) return text;
  const initiator::NegotiatedParams open = initiator::WithOneRoundTripKeys(n);
  const std::string keys = initiator::KeysForOneRoundTripWrites(n);
  if (keys.empty() || initiator::WriteRoundTrips(WriteBytes(t, tuning, open), open) != 1) {
    return text;  // e.g. --io-size larger than any first burst
  }
  return text + "; a target allowing " + keys +
         " takes them in 1 (docs/operations.md, \"Writing to a LUN across a WAN\")";
}

nlohmann::json NegotiatedJson(const initiator::NegotiatedParams& n) {
  return {{"max_burst_length", n.max_burst_length},
          {"first_burst_length", n.first_burst_length},
          {"initiator_max_recv_data_segment_length", n.initiator_max_recv_data_segment_length},
          {"target_max_recv_data_segment_length", n.target_max_recv_data_segment_length},
          {"immediate_data", n.immediate_data},
          {"initial_r2t", n.initial_r2t},
          {"header_digest", n.header_digest_crc32c ? "CRC32C" : "None"},
          {"max_connections", n.max_connections},
          {"max_outstanding_r2t", n.max_outstanding_r2t},
          {"error_recovery_level", n.error_recovery_level},
          {"target_keys", n.target_keys}};
}

void PrintJson(const initiator::ProbeReport& report, const initiator::TuningRequest& tuning) {
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : report.targets) {
    nlohmann::json jt = {{"name", t.name}};
    if (!t.portals.empty()) jt["portals"] = t.portals;
    if (!t.error.ok()) {
      jt["error"] = t.error.message();
    } else {
      jt["login_ms"] = Millis(t.login_time);
      jt["rtt_ms"] = Millis(t.rtt);
      if (t.rate) {
        const auto& r = *t.rate;
        jt["rate_test"] = {{"bytes", r.bytes},
                           {"seconds", std::chrono::duration<double>(r.elapsed).count()},
                           {"bytes_per_second", r.bytes_per_second},
                           {"steady_bytes_per_second", r.steady_bytes_per_second},
                           {"connections", r.connections},
                           {"queue_depth", r.queue_depth},
                           {"io_size", r.io_size},
                           {"plan", r.plan},
                           {"recommended_flags", RecommendedFlags(r)}};
      }
      jt["negotiated"] = NegotiatedJson(t.negotiated);
      const uint64_t write_bytes = WriteBytes(t, tuning, t.negotiated);
      jt["writes"] = {{"bytes", write_bytes},
                      {"unsolicited_bytes", initiator::UnsolicitedWriteBytes(t.negotiated)},
                      {"round_trips", initiator::WriteRoundTrips(write_bytes, t.negotiated)}};
      nlohmann::json luns = nlohmann::json::array();
      for (const auto& lun : t.luns)
        luns.push_back(LunJson(lun));
      jt["luns"] = luns;
    }
    targets.push_back(jt);
  }
  nlohmann::json out = {
      {"portal", report.portal}, {"discovered", report.discovered}, {"targets", targets}};
  OutputJson(out, 2);
}

void PrintHuman(const initiator::ProbeReport& report, const initiator::TuningRequest& tuning) {
  std::printf("Portal %s\n", report.portal.c_str());
  for (const auto& t : report.targets) {
    std::printf("\nTarget %s\n", t.name.c_str());
    if (!t.error.ok()) {
      std::printf("  error: %s\n", t.error.message().c_str());
      continue;
    }
    const auto& n = t.negotiated;
    std::printf("  login       %.1f ms (TCP connect + iSCSI login)\n", Millis(t.login_time));
    if (t.rtt.count() > 0) std::printf("  RTT         %.1f ms\n", Millis(t.rtt));
    std::printf(
        "  negotiated  MaxBurstLength=%u FirstBurstLength=%u MaxRecvDataSegmentLength="
        "%u/%u (ours/target's) ImmediateData=%s InitialR2T=%s HeaderDigest=%s\n",
        n.max_burst_length, n.first_burst_length, n.initiator_max_recv_data_segment_length,
        n.target_max_recv_data_segment_length, n.immediate_data ? "Yes" : "No",
        n.initial_r2t ? "Yes" : "No", n.header_digest_crc32c ? "CRC32C" : "None");
    std::printf("  writes      %s\n", WritesText(t, tuning).c_str());
    std::printf("  %-4s %-11s %-30s %-9s %-9s %-24s %s\n", "LUN", "TYPE", "SIZE", "BLOCK",
                "MAX XFER", "VENDOR/PRODUCT", "SERIAL");
    for (const auto& lun : t.luns) {
      std::string size = "-", block = "-", xfer = "-";
      if (lun.is_disk()) {
        size = FormatBytes(lun.size_bytes()) + " (" + std::to_string(lun.size_bytes()) + " B)";
        block = std::to_string(lun.block_size);
        if (lun.physical_block_size != lun.block_size) {
          block += "/" + std::to_string(lun.physical_block_size);
        }
        if (lun.max_transfer_blocks != 0) {
          xfer = FormatBytes(uint64_t{lun.max_transfer_blocks} * lun.block_size);
        }
      }
      const std::string vp = lun.vendor + " " + lun.product;
      std::printf("  %-4d %-11s %-30s %-9s %-9s %-24s %s\n", lun.lun, lun.device_type.c_str(),
                  size.c_str(), block.c_str(), xfer.c_str(), vp.c_str(), lun.serial.c_str());
      if (lun.is_disk()) std::printf("       provisioning: %s\n", ProvisioningText(lun).c_str());
      if (lun.is_disk() && lun.write_protected) {
        std::printf(
            "       write-protected: a read-only LUN (restore, copy and replicate to it "
            "are refused)\n");
      }
    }
    if (t.rate) {
      const auto& r = *t.rate;
      std::printf(
          "  rate test   %s once ramped up (%s over %s including start-up) with %d "
          "connections x %d READs x %s\n",
          FormatRate(r.steady_bytes_per_second).c_str(), FormatRate(r.bytes_per_second).c_str(),
          FormatDuration(r.elapsed).c_str(), r.connections, r.queue_depth,
          FormatBytes(r.io_size).c_str());
      std::printf(
          "  recommended %s  (what autotune settled on; copy and snapshot choose it by "
          "themselves)\n",
          RecommendedFlags(r).c_str());
    }
  }
}

Status RunProbe(const ProbeCommandOptions& opts) {
  WB_ASSIGN_OR_RETURN(initiator::IscsiUrl url, initiator::ParseIscsiUrl(opts.url));
  initiator::ProbeOptions probe;
  probe.lun = url.lun;
  WB_ASSIGN_OR_RETURN(auto rate_test, ParseDuration(opts.rate_test, "s"));
  probe.rate_test = std::chrono::ceil<std::chrono::milliseconds>(rate_test);
  initiator::IscsiSourceOptions tuned;
  WB_RETURN_IF_ERROR(ApplyTuningFlags(opts.tuning, &tuned));
  probe.tuning = tuned.tuning;
  WB_ASSIGN_OR_RETURN(probe.connection, BuildConnectionOptions(std::move(url), opts.target));
  probe.connection.congestion_control = tuned.connection.congestion_control;
  WB_ASSIGN_OR_RETURN(initiator::ProbeReport report, initiator::Probe(probe));
  if (opts.json) {
    PrintJson(report, probe.tuning);
  } else {
    PrintHuman(report, probe.tuning);
  }
  std::fflush(stdout);
  size_t failed = 0;
  Status first_error;
  for (const auto& t : report.targets) {
    if (t.error.ok()) continue;
    if (failed++ == 0) first_error = t.error;
  }
  if (report.discovered && report.targets.empty()) {
    return Status::NotFound("the portal " + report.portal + " offers no targets to this initiator");
  }
  if (failed > 0) {
    // The first failure decides the exit code (e.g. 5 when CHAP was refused).
    return Status(first_error.code(),
                  std::to_string(failed) + " of " + std::to_string(report.targets.size()) +
                      " targets could not be probed; first: " + first_error.message());
  }
  return Status::Ok();
}

}  // namespace

void RegisterProbe(CLI::App& app, Runner* runner) {
  auto opts = std::make_shared<ProbeCommandOptions>();
  CLI::App* cmd = app.add_subcommand("probe", "Log in to an iSCSI target and describe its LUNs");
  cmd->add_option("url", opts->url,
                  "iscsi://[user@]host[:port][/target-iqn[/lun]]  (port defaults to 3260)")
      ->required();
  cmd->add_flag("--json", opts->json, "print a JSON document instead of a table");
  cmd->add_option("--rate-test", opts->rate_test,
                  "with a LUN in the URL, read this long to measure throughput and show the "
                  "settings that reached it; 0 skips it")
      ->capture_default_str();
  AddTuningFlags(cmd, &opts->tuning);
  AddTargetFlags(cmd, &opts->target);
  cmd->footer(
      "\nDescribes the target: LUNs, size, block size, block limits and the negotiated iSCSI\n"
      "parameters, the round trip, what a WRITE costs under those parameters (round trips;\n"
      "restore and replicate to a LUN send them), and (with a LUN in the URL) a short rate\n"
      "test with the settings autotune reached. A URL without a target discovers the\n"
      "portal's targets and probes each. Nothing is written to the target.\n"
      "\nEXAMPLES:\n"
      "  wanbackup probe iscsi://san.example.net\n"
      "  wanbackup probe iscsi://san.example.net/iqn.2001-05.com.example:lun-db/1 --json\n"
      "  WANBACKUP_CHAP_SECRET=... wanbackup probe iscsi://backup@san/iqn.2001-05.com.example:db");
  cmd->callback([opts, runner] { *runner = [opts] { return RunProbe(*opts); }; });
}

}  // namespace wanbackup::cli

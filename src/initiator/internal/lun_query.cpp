#include "initiator/internal/lun_query.h"

#include <cstdio>
#include <string>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "initiator/internal/provisioning.h"

namespace wanbackup::initiator::internal {
namespace {

std::string Trimmed(const char* text) {
  std::string s(text != nullptr ? text : "");
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0'))
    s.pop_back();
  size_t start = 0;
  while (start < s.size() && s[start] == ' ')
    ++start;
  return s.substr(start);
}

std::string DeviceTypeName(int code) {
  switch (code) {
    case SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS:
      return "disk";
    case SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_SEQUENTIAL_ACCESS:
      return "tape";
    case SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_MMC:
      return "cd/dvd";
    case SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_STORAGE_ARRAY_CONTROLLER:
      return "controller";
    case SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_ENCLOSURE_SERVICES:
      return "enclosure";
    default:
      return "type " + std::to_string(code);
  }
}

// Decoders of QueryLun's answers, one per command. Each fills its part of `info`.

// Standard INQUIRY: fails when the LUN does not exist.
Status DecodeStandardInquiry(scsi_task* task, const Connection& conn, const std::string& at,
                             LunInfo* info) {
  auto* inq = static_cast<scsi_inquiry_standard*>(scsi_datain_unmarshall(task));
  if (inq == nullptr) return Status::IoError("INQUIRY" + at + ": cannot decode the answer");
  // Peripheral qualifier 3: "not capable of supporting a device on this LUN" = no such LUN.
  if (inq->qualifier != SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED) {
    return Status::NotFound("LUN " + std::to_string(info->lun) + " does not exist on " +
                            conn.where());
  }
  info->device_type_code = inq->device_type;
  info->device_type = DeviceTypeName(inq->device_type);
  info->vendor = Trimmed(inq->vendor_identification);
  info->product = Trimmed(inq->product_identification);
  info->revision = Trimmed(inq->product_revision_level);
  return Status::Ok();
}

void DecodeSerial(scsi_task* task, LunInfo* info) {
  auto* sn = static_cast<scsi_inquiry_unit_serial_number*>(scsi_datain_unmarshall(task));
  if (sn != nullptr) info->serial = Trimmed(sn->usn);
}

// The first designator of the Device Identification page, as text or in hex.
void DecodeIdentifier(scsi_task* task, LunInfo* info) {
  auto* di = static_cast<scsi_inquiry_device_identification*>(scsi_datain_unmarshall(task));
  if (di == nullptr || di->designators == nullptr) return;
  const scsi_inquiry_device_designator* d = di->designators;
  if (d->code_set == SCSI_CODESET_ASCII || d->code_set == SCSI_CODESET_UTF8) {
    info->identifier = Trimmed(std::string(d->designator, d->designator_length).c_str());
    return;
  }
  for (int i = 0; i < d->designator_length; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(d->designator[i]));
    info->identifier += b;
  }
}

Status DecodeCapacity(scsi_task* task, const std::string& at, LunInfo* info) {
  auto* cap = static_cast<scsi_readcapacity16*>(scsi_datain_unmarshall(task));
  if (cap == nullptr) return Status::IoError("READ CAPACITY(16)" + at + ": cannot decode");
  if (cap->block_length == 0 || cap->block_length % 512 != 0) {
    return Status::Unsupported("LUN " + std::to_string(info->lun) + " reports a block size of " +
                               std::to_string(cap->block_length) + " bytes");
  }
  info->block_count = cap->returned_lba + 1;
  info->block_size = cap->block_length;
  info->physical_block_size = cap->block_length << cap->lbppbe;
  info->thin_provisioned = cap->lbpme != 0;
  info->unmapped_reads_zero = cap->lbprz != 0;
  return Status::Ok();
}

// The mode parameter header of MODE SENSE(6): byte 2 is the device-specific parameter, whose
// top bit for a disk is WP (SBC: the medium is write-protected).
void DecodeWriteProtect(scsi_task* task, LunInfo* info) {
  if (task->datain.data != nullptr && task->datain.size >= 4) {
    info->write_protected = (task->datain.data[2] & 0x80) != 0;
  }
}

void DecodeBlockLimits(scsi_task* task, LunInfo* info) {
  auto* bl = static_cast<scsi_inquiry_block_limits*>(scsi_datain_unmarshall(task));
  if (bl == nullptr) return;
  info->has_block_limits = true;
  info->max_transfer_blocks = bl->max_xfer_len;
  info->optimal_transfer_blocks = bl->opt_xfer_len;
  info->max_write_same_blocks = bl->max_ws_len;
}

void DecodeProvisioning(scsi_task* task, LunInfo* info) {
  const size_t size = task->datain.size > 0 ? static_cast<size_t>(task->datain.size) : 0;
  std::optional<LbpPage> page = ParseLbpPage(task->datain.data, size);
  if (!page) return;
  info->has_provisioning_page = true;
  info->unmap_supported = page->unmap;
  info->write_same_unmap_supported = page->write_same_unmap;
  info->page_unmapped_reads_zero = page->lbprz != 0;
  info->provisioning_type = page->provisioning_type;
}

}  // namespace

Result<std::vector<int>> ReportLuns(Connection& conn) {
  WB_ASSIGN_OR_RETURN(
      ScsiTaskPtr task,
      conn.Execute([](iscsi_context* iscsi, auto cb,
                      void* data) { return iscsi_reportluns_task(iscsi, 0, 16384, cb, data); },
                   "REPORT LUNS"));
  auto* list = static_cast<scsi_reportluns_list*>(scsi_datain_unmarshall(task.get()));
  if (list == nullptr) return Status::IoError("REPORT LUNS: cannot decode the target's answer");
  std::vector<int> luns;
  for (uint32_t i = 0; i < list->num; ++i)
    luns.push_back(list->luns[i]);
  return luns;
}

Result<LunInfo> QueryLun(Connection& conn, int lun) {
  LunInfo info;
  info.lun = lun;
  const std::string at = " (LUN " + std::to_string(lun) + ")";
  auto inquiry = [lun](int evpd, int page) -> Connection::IssueFn {
    return [=](iscsi_context* iscsi, auto cb, void* data) {
      return iscsi_inquiry_task(iscsi, lun, evpd, page, 255, cb, data);
    };
  };
  // Everything at once, behind the TEST UNIT READY that takes the new session's UNIT ATTENTION
  // (ExecuteAllFirst): one round trip instead of seven (two where the login's command window is
  // narrower: tgt's lets 2 commands through until it answers one). READ CAPACITY and the Block
  // Limits and Logical Block Provisioning pages fail harmlessly on a LUN that is not a disk (or a
  // target without the page).
  std::vector<Result<ScsiTaskPtr>> r = conn.ExecuteAllFirst(
      lun,
      {inquiry(0, 0), inquiry(1, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER),
       inquiry(1, SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION),
       [lun](iscsi_context* iscsi, auto cb, void* data) {
         return iscsi_readcapacity16_task(iscsi, lun, cb, data);
       },
       inquiry(1, SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS),
       [lun](iscsi_context* iscsi, auto cb, void* data) {
         return iscsi_modesense6_task(iscsi, lun, 1, SCSI_MODESENSE_PC_CURRENT,
                                      SCSI_MODEPAGE_RETURN_ALL_PAGES, 0, 255, cb, data);
       },
       inquiry(1, SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING)},
      "describing LUN " + std::to_string(lun));
  if (conn.broken()) {
    for (auto& result : r) {
      if (!result.ok()) return result.status();
    }
  }
  if (!r[0].ok()) return r[0].status().WithContext("INQUIRY" + at);
  WB_RETURN_IF_ERROR(DecodeStandardInquiry(r[0]->get(), conn, at, &info));
  if (r[1].ok()) DecodeSerial(r[1]->get(), &info);
  if (r[2].ok()) DecodeIdentifier(r[2]->get(), &info);
  if (!info.is_disk()) return info;

  if (!r[3].ok()) return r[3].status().WithContext("READ CAPACITY(16)" + at);
  WB_RETURN_IF_ERROR(DecodeCapacity(r[3]->get(), at, &info));
  if (r[4].ok()) DecodeBlockLimits(r[4]->get(), &info);
  if (r[5].ok()) DecodeWriteProtect(r[5]->get(), &info);
  if (r[6].ok()) DecodeProvisioning(r[6]->get(), &info);
  return info;
}

Status VerifySameLun(Connection& conn, const LunInfo& expected, bool identity) {
  const int lun = expected.lun;
  LunInfo now;
  if (identity) {
    // The whole description in one batch answers both questions, capacity and identity: one
    // round trip, where READ CAPACITY first and the description after it took two.
    WB_ASSIGN_OR_RETURN(now, QueryLun(conn, lun));
  } else {
    std::vector<Result<ScsiTaskPtr>> r =
        conn.ExecuteAllFirst(lun, {[lun](iscsi_context* iscsi, auto cb, void* data) {
                               return iscsi_readcapacity16_task(iscsi, lun, cb, data);
                             }},
                             "READ CAPACITY(16)");
    WB_ASSIGN_OR_RETURN(ScsiTaskPtr task, std::move(r.front()));
    auto* cap = static_cast<scsi_readcapacity16*>(scsi_datain_unmarshall(task.get()));
    if (cap == nullptr) return Status::IoError("READ CAPACITY(16): cannot decode the answer");
    now.block_count = cap->returned_lba + 1;
    now.block_size = cap->block_length;
  }
  if (now.block_count != expected.block_count || now.block_size != expected.block_size) {
    return Status::Corruption(
        "LUN " + std::to_string(lun) + " on " + conn.where() + " changed size: it had " +
        std::to_string(expected.block_count) + " blocks of " + std::to_string(expected.block_size) +
        " bytes, now " + std::to_string(now.block_count) + " of " + std::to_string(now.block_size));
  }
  if (identity && (now.serial != expected.serial || now.identifier != expected.identifier)) {
    return Status::Corruption("after reconnecting, LUN " + std::to_string(lun) + " on " +
                              conn.where() + " is a different device (serial '" + now.serial +
                              "', was '" + expected.serial + "')");
  }
  return Status::Ok();
}

}  // namespace wanbackup::initiator::internal

#include "lockstep/agent/gpu/gpu_json.h"

namespace lockstep::agent::gpu {
namespace {

using nlohmann::json;

template <typename T>
void Put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace

json ToJson(const GpuSample& g) {
  json j = {{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}};
  if (!g.pci_bus_id.empty()) j["pciBusId"] = g.pci_bus_id;
  Put(j, "error", g.error);
  Put(j, "temperatureC", g.temperature_c);
  Put(j, "slowdownC", g.slowdown_c);
  Put(j, "shutdownC", g.shutdown_c);
  if (g.temperature_c && g.slowdown_c) j["slowdownMarginC"] = *g.slowdown_c - *g.temperature_c;
  json ecc = json::object();
  Put(ecc, "correctedVolatile", g.ecc.corrected_volatile);
  Put(ecc, "uncorrectedVolatile", g.ecc.uncorrected_volatile);
  Put(ecc, "correctedAggregate", g.ecc.corrected_aggregate);
  Put(ecc, "uncorrectedAggregate", g.ecc.uncorrected_aggregate);
  if (!ecc.empty()) j["ecc"] = ecc;
  if (g.remapped_rows) {
    j["remappedRows"] = {{"correctable", g.remapped_rows->correctable},
                         {"uncorrectable", g.remapped_rows->uncorrectable},
                         {"pending", g.remapped_rows->pending},
                         {"failed", g.remapped_rows->failed}};
  }
  json retired = json::object();
  Put(retired, "multipleSingleBit", g.retired_pages_single_bit);
  Put(retired, "doubleBit", g.retired_pages_double_bit);
  if (!retired.empty()) j["retiredPages"] = retired;
  Put(j, "pcieReplays", g.pcie_replays);
  Put(j, "eccMode", g.ecc_mode);
  Put(j, "eccModePending", g.ecc_mode_pending);
  Put(j, "persistenceMode", g.persistence_mode);
  Put(j, "smClockMHz", g.sm_clock_mhz);
  Put(j, "smClockMaxMHz", g.sm_clock_max_mhz);
  Put(j, "clocksEventReasons", g.clocks_event_reasons);
  if (!g.nvlinks.empty()) {
    json links = json::array();
    for (const NvLinkErrors& l : g.nvlinks) {
      json e = {{"link", l.link}};
      Put(e, "replay", l.replay);
      Put(e, "recovery", l.recovery);
      Put(e, "crcFlit", l.crc_flit);
      Put(e, "crcData", l.crc_data);
      links.push_back(e);
    }
    j["nvlinks"] = links;
  }
  if (!g.not_available.empty()) j["notAvailable"] = g.not_available;
  return j;
}

json ToJson(const GpuSnapshot& s) {
  json gpus = json::array();
  for (const GpuSample& g : s.gpus) gpus.push_back(ToJson(g));
  return {{"driverVersion", s.driver_version}, {"gpus", gpus}};
}

json ToJson(const XidEvent& x) { return {{"gpu", x.gpu_index}, {"uuid", x.uuid}, {"xid", x.xid}}; }

json ToJson(const NodeGpuVerdict& v) {
  const GpuCondition c = ConditionFor(v);
  json j = {{"state", GpuStateName(v.state)},
            {"reasons", v.reasons},
            {"condition", {{"type", c.type}, {"status", c.status}, {"reason", c.reason}, {"message", c.message}}}};
  if (v.state == GpuState::kUnavailable) j["unavailableReason"] = v.unavailable_reason;
  return j;
}

}  // namespace lockstep::agent::gpu

// GpuHealthPolicy from a TrainingJob's spec.earlyWarning (api::EarlyWarningSpec)
// or a node's spec.gpu.earlyWarning (api::GpuEarlyWarningSpec, agent.yaml).
// Header-only so lockstep_agent_gpu_core does not link lockstep_api (the
// standalone lockstep-gpu-status binary needs nothing but libc); include it
// where lockstep_api is linked. Pure.
#pragma once

#include "lockstep/agent/gpu/gpu_health.h"
#include "lockstep/api/fabric_policy.h"
#include "lockstep/api/training_job.h"

namespace lockstep::agent::gpu {

inline GpuHealthPolicy PolicyFromEarlyWarning(const api::EarlyWarningSpec& spec) {
  GpuHealthPolicy p;
  p.temp_celsius = spec.gpu_temp_celsius;
  p.ecc_corrected_per_hour = spec.ecc_single_bit_per_hour;
  p.xids = spec.xids;
  return p;
}

inline GpuHealthPolicy PolicyFromGpuSpec(const api::GpuEarlyWarningSpec& spec) {
  GpuHealthPolicy p;
  p.temp_celsius = spec.gpu_temp_celsius;
  p.slowdown_margin_celsius = spec.slowdown_margin_celsius;
  p.ecc_corrected_per_hour = spec.ecc_single_bit_per_hour;
  p.pending_row_remaps = spec.pending_row_remaps;
  p.xids = spec.xids;
  return p;
}

}  // namespace lockstep::agent::gpu

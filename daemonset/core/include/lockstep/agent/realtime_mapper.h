// RealtimeMapper: maps CLOCK_REALTIME readings onto CLOCK_MONOTONIC_RAW using
// recent (realtime, raw) sample pairs. REALTIME is slewed by NTP/PTP daemons
// (up to 500 ppm) and may be stepped; MONOTONIC_RAW runs on the bare
// oscillator. Between two samples the mapper interpolates, so a slew rate
// change costs at most (rate change x sample spacing); outside them it
// extrapolates from the newest sample with the most recent rate. A step of
// REALTIME (realtime moving backwards or far off the raw rate) resets the
// history. Pure; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace lockstep::agent {

class RealtimeMapper {
 public:
  explicit RealtimeMapper(size_t capacity = 64) : capacity_(capacity) {}

  // Adds a sample taken at (nearly) the same instant on both clocks.
  // REQUIRES: raw_ns increases from call to call.
  void AddSample(int64_t realtime_ns, int64_t raw_ns);
  // REQUIRES: at least one sample.
  int64_t ToRaw(int64_t realtime_ns) const;
  bool empty() const { return samples_.empty(); }
  int64_t newest_raw() const { return samples_.empty() ? 0 : samples_.back().raw; }

 private:
  struct Sample {
    int64_t rt;
    int64_t raw;
  };
  static int64_t Interpolate(const Sample& a, const Sample& b, int64_t rt);
  size_t capacity_;
  std::deque<Sample> samples_;
};

}  // namespace lockstep::agent

// The CPU cost of signing gossip records (issue 7 section 5): Ed25519 sign and
// verify of one record (a 40-byte served model or a 56-byte edge fit plus a
// domain prefix), and what that means at the agent's default probe rate.
// Prints numbers; asserts nothing. Usage: node_signer_bench [iterations]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lockstep/agent/node_signer.h"
#include "lockstep/agent/probe_packet.h"

using namespace lockstep::agent;

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  auto signer = NodeSigner::Generate();
  if (!signer.ok()) return 1;
  std::vector<uint8_t> record(16 + kEdgeRecordSize - kSignatureSize, 0x5a);  // SigningBytes(edge)
  // CPU time of this thread: wall time on a shared, loaded machine says little.
  auto cpu_us = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  };
  const double t0 = cpu_us();
  Signature sig{};
  for (int i = 0; i < n; ++i) {
    record[0] = static_cast<uint8_t>(i);
    sig = signer->Sign(record);
  }
  const double t1 = cpu_us();
  int ok = 0;
  for (int i = 0; i < n; ++i) ok += signer->public_key().Verify(record, sig) ? 1 : 0;
  const double t2 = cpu_us();
  const double sign_us = (t1 - t0) / n;
  const double verify_us = (t2 - t1) / n;
  // Default agent: probe.intervalMs 20 (50 reports/s per target), gossip on
  // every 5th report, up to kMaxEdgeRecords + kMaxModelRecords records each;
  // targets = peersPerNode (16) chosen + those probing us back (<= 16 more).
  const int targets = 2 * 16;  // peersPerNode 16, upper bound
  const double gossip_reports_per_s = targets * 50.0 / 5;
  const double records_per_s = gossip_reports_per_s * static_cast<double>(kMaxEdgeRecords + kMaxModelRecords);
  std::printf("ed25519 sign   %.1f us CPU/record (%.0f records/s per core)\n", sign_us, 1e6 / sign_us);
  std::printf("ed25519 verify %.1f us CPU/record (%.0f records/s per core), %d/%d verified\n", verify_us,
              1e6 / verify_us, ok, n);
  std::printf("default rate: %d targets x 50 reports/s / 5 = %.0f gossip reports/s x %zu records = %.0f records/s\n",
              targets, gossip_reports_per_s, kMaxEdgeRecords + kMaxModelRecords, records_per_s);
  std::printf("verifying every received record: %.1f%% of a core; signing own records once per window "
              "(~%d per 2 s): %.3f%% of a core\n",
              records_per_s * verify_us / 1e4, targets + 1, (targets + 1) / 2.0 * sign_us / 1e4);
  return 0;
}

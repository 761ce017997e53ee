// Helpers shared by decide.cc (convergence) and apply_event.cc (an event's
// direct effect). Private to lockstep_migration; pure, thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "lockstep/migration/decide.h"

namespace lockstep::migration::internal {

std::string Secs(double s);  // "1.500"
std::string Num(int64_t v);
// Heartbeated "training" (or "done") in generation g.
bool Joined(const Member& m, int64_t g);
// Alive members outside the current generation, in registration order.
std::vector<const Member*> SparePool(const JobState& s);
// A member of the current generation said "done" (the job ran every step).
bool GenerationDone(const JobState& s);
// Marks a live member dead (fencing it when asked), or finished once the generation is done.
void MarkDead(JobState& s, Member& m, const std::string& cause, const std::string& reason, double now, bool fence,
              Actions& a);
void EnterTerminal(JobState& s, const std::string& reason, double now, Actions& a);
Migration* FindMigration(JobState& s, const std::string& id);
// The current generation failed: collect reports (a pause in progress becomes a failure).
void StartCollecting(JobState& s, const std::string& cause, const std::string& category, double now, Actions& a);
// One event's direct effect, or the error that refuses it (before any change).
Status ApplyEvent(JobState& s, const Event& event, double now, Actions& a, std::string& created);

}  // namespace lockstep::migration::internal

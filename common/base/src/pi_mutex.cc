#include "lockstep/common/pi_mutex.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace lockstep {
namespace {

// Errors here are programming errors (or a kernel without PI futexes, which
// Linux has had since 2.6.18): say which and stop.
void Check(int rc, const char* what) {
  if (rc == 0) return;
  std::fprintf(stderr, "PiMutex: %s failed: error %d\n", what, rc);
  std::abort();
}

}  // namespace

PiMutex::PiMutex() {
  pthread_mutexattr_t attr;
  Check(pthread_mutexattr_init(&attr), "pthread_mutexattr_init");
  Check(pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT), "pthread_mutexattr_setprotocol");
  Check(pthread_mutex_init(&mu_, &attr), "pthread_mutex_init");
  pthread_mutexattr_destroy(&attr);
}

PiMutex::~PiMutex() { pthread_mutex_destroy(&mu_); }

void PiMutex::lock() { Check(pthread_mutex_lock(&mu_), "pthread_mutex_lock"); }

void PiMutex::unlock() { Check(pthread_mutex_unlock(&mu_), "pthread_mutex_unlock"); }

bool PiMutex::try_lock() {
  const int rc = pthread_mutex_trylock(&mu_);
  if (rc == EBUSY) return false;
  Check(rc, "pthread_mutex_trylock");
  return true;
}

}  // namespace lockstep

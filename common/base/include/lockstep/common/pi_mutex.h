// PiMutex: a mutex with priority inheritance (PTHREAD_PRIO_INHERIT). The
// fabric prober runs SCHED_FIFO and shares a few locks with normal threads
// (the clock-sync loop, the metrics scrape, the logger). With a plain mutex,
// a normal thread preempted while holding one keeps the prober waiting until
// the scheduler gets back to it: tens of ms on a busy node, long enough for
// peers to declare our paths down (priority inversion). With this one, a
// real-time waiter lends its priority to the holder, which runs at once and
// releases. Costs the same as a plain mutex when uncontended.
//
// BasicLockable and Lockable: use with std::lock_guard / std::unique_lock
// (and std::condition_variable_any). Not recursive.
#pragma once

#include <pthread.h>

namespace lockstep {

class PiMutex {
 public:
  PiMutex();
  ~PiMutex();
  PiMutex(const PiMutex&) = delete;
  PiMutex& operator=(const PiMutex&) = delete;

  void lock();
  void unlock();
  bool try_lock();

 private:
  pthread_mutex_t mu_;
};

}  // namespace lockstep

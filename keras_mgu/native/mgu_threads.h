// Threads for the MGU loops (mgu_kernel.h): the batch split into chunks.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace keras_mgu {

// ------------------------------------------------------------------ threads
// The sequences of a batch are independent, so a call splits the batch into
// contiguous chunks, each running the whole time loop on its own thread; only
// the dU sums meet, added in chunk order. A call runs on at most max_threads
// threads (0: the CPUs this process may run on), a chunk has at least
// kMinRows sequences, and a call is split only when its work,
// steps * batch * Hp^2, is at least kMinWork (below it, starting a thread
// costs more than it saves).
constexpr int64_t kMinRows = 4;
constexpr int64_t kMinWork = int64_t(1) << 18;

inline int64_t available_cpus() {
#ifdef __linux__
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) return std::max(1, CPU_COUNT(&cpus));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

#ifdef KERAS_MGU_OPENMP
// GNU OpenMP's thread pool does not survive fork(): a child that enters a
// parallel region after its parent had one hangs. So a forked child of a
// process that had loaded the library runs every call on one thread.
inline std::atomic<bool> forked_child(false);
inline void mark_forked_child() { forked_child = true; }
inline const int fork_handler_registered = pthread_atfork(nullptr, nullptr, mark_forked_child);
#endif

inline int64_t chunk_count(int64_t steps, int64_t batch, int64_t hp, int64_t max_threads) {
  if (max_threads == 1 || steps * batch * hp * hp < kMinWork) return 1;
#ifdef KERAS_MGU_OPENMP
  if (forked_child) return 1;
#endif
  const int64_t threads = max_threads > 1 ? max_threads : available_cpus();
  return std::max<int64_t>(1, std::min(threads, batch / kMinRows));
}

// Runs fn(chunk, first_row, rows) over `chunks` contiguous chunks of `batch`
// rows. Built with KERAS_MGU_OPENMP, the chunks run in an OpenMP parallel
// region: in a PyTorch process that is PyTorch's own OpenMP thread pool, whose
// workers are already awake. Otherwise chunk 0 runs on the calling thread and
// every other chunk on a new std::thread (or here, if one cannot start).
// Returns 0, or 2 when a chunk ran out of memory.
template <typename Fn>
int for_chunks(int64_t batch, int64_t chunks, Fn fn) {
  std::atomic<bool> failed(false);
  auto run = [&](int64_t i) {
    try {
      const int64_t first = batch * i / chunks, last = batch * (i + 1) / chunks;
      fn(i, first, last - first);
    } catch (const std::bad_alloc&) {
      failed = true;
    }
  };
  if (chunks == 1) {
    run(0);
    return failed ? 2 : 0;
  }
#ifdef KERAS_MGU_OPENMP
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
  for (int64_t i = 0; i < chunks; ++i) run(i);
#else
  std::vector<std::thread> workers;
  std::vector<int64_t> here = {0};
  for (int64_t i = 1; i < chunks; ++i) {
    try {
      workers.emplace_back(run, i);
    } catch (const std::system_error&) {
      here.push_back(i);
    }
  }
  for (int64_t i : here) run(i);
  for (std::thread& worker : workers) worker.join();
#endif
  return failed ? 2 : 0;
}

}  // namespace keras_mgu

// Threads for the MGU loops (mgu_kernel.h): the batch split into tasks.
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
// contiguous chunks, one per thread, each running the whole time loop; only
// the dU sums meet, added in a fixed order. A call runs on at most max_threads
// threads (0: the CPUs this process may run on), a thread has at least
// kMinRows sequences, and a call is split only when its work,
// steps * batch * Hp^2, is at least kMinWork (below it, starting a thread
// costs more than it saves).
//
// With G groups (G recurrent kernels, group g owning the rows
// [g B/G, (g+1) B/G)), a loop runs over the rows of one group only: the work
// is a list of tasks, each a range of rows of one group: each thread takes an
// equal share of the rows, cut into tasks where a group ends. With one group
// the tasks are the chunks above.
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

inline int64_t chunk_count(int64_t steps, int64_t batch, int64_t hp, int64_t max_threads,
                           int64_t groups = 1) {
  if (max_threads == 1 || steps * batch * hp * hp < kMinWork) return 1;
#ifdef KERAS_MGU_OPENMP
  if (forked_child) return 1;
#endif
  const int64_t threads = max_threads > 1 ? max_threads : available_cpus();
  return std::max<int64_t>(1, std::min(threads, std::max(batch / kMinRows, groups)));
}

// `rows` rows of group `group`, from row `first` of the batch.
struct Task {
  int64_t group, first, rows;
};

// The tasks of a call; thread i runs tasks[start[i]] to tasks[start[i + 1] - 1].
struct Plan {
  std::vector<Task> tasks;
  std::vector<int64_t> start = {0};

  int64_t threads() const { return int64_t(start.size()) - 1; }
  void add(int64_t group, int64_t first, int64_t rows) {
    if (rows > 0) tasks.push_back(Task{group, first, rows});
  }
  void end_thread() { start.push_back(int64_t(tasks.size())); }
};

// The tasks of `batch` rows in `groups` groups (batch % groups == 0) on
// `threads` threads (chunk_count): thread i takes the rows
// [i B / threads, (i + 1) B / threads), cut where a group ends, so that the
// threads get equal shares of rows however the groups fall.
inline Plan plan_tasks(int64_t batch, int64_t groups, int64_t threads) {
  Plan plan;
  const int64_t rows = batch / groups;
  for (int64_t i = 0; i < threads; ++i) {
    int64_t first = batch * i / threads;
    const int64_t last = batch * (i + 1) / threads;
    while (first < last) {
      const int64_t group = first / rows, end = std::min(last, (group + 1) * rows);
      plan.add(group, first, end - first);
      first = end;
    }
    plan.end_thread();
  }
  return plan;
}

// Runs fn(task_index, task) over the tasks of `plan`, each thread its own.
// Built with KERAS_MGU_OPENMP, the threads run in an OpenMP parallel region:
// in a PyTorch process that is PyTorch's own OpenMP thread pool, whose workers
// are already awake. Otherwise thread 0's tasks run on the calling thread and
// every other thread's on a new std::thread (or here, if one cannot start).
// Returns 0, or 2 when a task ran out of memory.
template <typename Fn>
int for_tasks(const Plan& plan, Fn fn) {
  std::atomic<bool> failed(false);
  auto run = [&](int64_t i) {
    try {
      for (int64_t k = plan.start[i]; k < plan.start[i + 1]; ++k) fn(k, plan.tasks[k]);
    } catch (const std::bad_alloc&) {
      failed = true;
    }
  };
  const int64_t threads = plan.threads();
  if (threads == 1) {
    run(0);
    return failed ? 2 : 0;
  }
#ifdef KERAS_MGU_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int64_t i = 0; i < threads; ++i) run(i);
#else
  std::vector<std::thread> workers;
  std::vector<int64_t> here = {0};
  for (int64_t i = 1; i < threads; ++i) {
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

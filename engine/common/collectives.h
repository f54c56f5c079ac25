// What is known about each collective, once: its name in flags and JSON, nccl-tests' name, whether
// it reduces (takes -o) or has a root (takes -r), its bus factor (busbw = algbw x factor, REFERENCE.md
// §5) and the copy traffic of its ideal in-place form over shared memory (reports/sweep/expected.h).
// dsbench's specs (bench/coll), the nccl-tests importer and the bounds read this table; a new
// collective is one more entry here, so none can be measured, imported or bounded with a factor of 0.
#pragma once

#include <string_view>

namespace ds {

struct CollectiveFacts {
  const char* name;           // "allreduce": the --coll name and the JSON's
  const char* ncclTestsName;  // "all_reduce": nccl-tests' binary is <this>_perf
  bool reduces;               // takes a reduce op (-o)
  bool rooted;                // takes a root (-r)
  double (*busFactor)(int nranks);
  const char* busFactorText;  // "2(n-1)/n", as REFERENCE.md writes it
  // All ranks' bytes copied by an ideal in-place form over shared memory, in units of the size S.
  double (*copyTraffic)(int nranks);
};

inline constexpr CollectiveFacts kAllreduceFacts{"allreduce",
                                                 "all_reduce",
                                                 true,
                                                 false,
                                                 [](int n) { return 2.0 * (n - 1) / n; },
                                                 "2(n-1)/n",
                                                 [](int n) { return static_cast<double>(n); }};
inline constexpr CollectiveFacts kAllgatherFacts{"allgather",
                                                 "all_gather",
                                                 false,
                                                 false,
                                                 [](int n) { return static_cast<double>(n - 1) / n; },
                                                 "(n-1)/n",
                                                 [](int n) { return static_cast<double>(n - 1); }};
inline constexpr CollectiveFacts kReduceScatterFacts{"reduce_scatter",
                                                     "reduce_scatter",
                                                     true,
                                                     false,
                                                     [](int n) { return static_cast<double>(n - 1) / n; },
                                                     "(n-1)/n",
                                                     [](int n) { return (n + 1) / 2.0; }};
inline constexpr CollectiveFacts kAlltoallFacts{"alltoall",
                                                "alltoall",
                                                false,
                                                false,
                                                [](int n) { return static_cast<double>(n - 1) / n; },
                                                "(n-1)/n",
                                                [](int n) { return static_cast<double>(n - 1); }};
inline constexpr CollectiveFacts kBroadcastFacts{"broadcast",
                                                 "broadcast",
                                                 false,
                                                 true,
                                                 [](int) { return 1.0; },
                                                 "1",
                                                 [](int n) { return static_cast<double>(n - 1); }};
inline constexpr CollectiveFacts kReduceFacts{
    "reduce", "reduce", true, true, [](int) { return 1.0; }, "1", [](int n) { return (n + 1) / 2.0; }};
inline constexpr CollectiveFacts kSendrecvFacts{"sendrecv",
                                                "sendrecv",
                                                false,
                                                false,
                                                [](int) { return 1.0; },
                                                "1",
                                                [](int n) { return static_cast<double>(n); }};

// Every collective, in the order `dsbench coll --coll all` runs them.
inline constexpr const CollectiveFacts* kCollectives[] = {
    &kAllreduceFacts, &kAllgatherFacts, &kReduceScatterFacts, &kAlltoallFacts,
    &kBroadcastFacts, &kReduceFacts,    &kSendrecvFacts};

// By our name; nullptr when `name` is none of ours.
const CollectiveFacts* collectiveFacts(std::string_view name);

}  // namespace ds

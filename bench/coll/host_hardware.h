// The hardware of every host in the job, for the sweep's metadata ("hardware"): the bounds each row is
// judged against (reports/baseline/expected.h) and the SKU a baseline is keyed by.
#pragma once

#include <string>
#include <vector>

#include "engine/init.h"
#include "reports/sweep/sweep_schema.h"

namespace ds::bench::coll {

// Collective over the store. The first rank of each host (local rank 0) reads that host's hardware
// (engine/host: sysfs and procfs, roots DSBENCH_SYSFS and DSBENCH_PROCFS; NVML by dlopen,
// DSBENCH_LIBNVML naming another library) and publishes it; rank 0 then reads one record per host,
// O(hosts) store reads, each bounded by the world's timeout. `ranks`: the gathered ranks (rank 0's
// list; empty elsewhere). Returns, on rank 0, one record per host in `hosts` order, named as `ranks`
// names it; a host without a local rank 0 has none. Other ranks get an empty list.
std::vector<hw::HostHardware> gatherHardware(World& world, const std::vector<report::SweepRank>& ranks,
                                             const std::vector<std::string>& hosts);

// Collective, for a job on one host (every rank must call it, or none): the host's memory copy
// bandwidth as the ranks see it, the B of the zero-copy memory bound (reports/baseline/expected.h) and
// ds_membw_probe's Bk with k = the job's ranks. Each rank copies `bytes` between two buffers of its own
// (touched first) `copies` times; the ranks start together behind a store barrier, and the figure is
// all the bytes copied over the span from the first start to the last end (a copy of S counts S), the
// best of `trials`. Returns it on rank 0 (GB/s; 0 when the buffers did not fit in available memory),
// 0 elsewhere. Costs a few tens of milliseconds at the defaults.
double measureCopyBandwidth(World& world, std::size_t bytes = std::size_t{32} << 20, int copies = 2,
                            int trials = 2);

// This host's record as gatherHardware's publishers read it.
hw::HostHardware readThisHost(const std::string& host);

}  // namespace ds::bench::coll

// Expected values from the hardware: for each measured sweep row, the bound that applies and the
// fraction of it the row achieved ("busbw 21.3 GB/s = 85% of the 2x200 Gb/s Ethernet line rate").
//
// Why the bound is compared with busbw: nccl-tests defines busbw = algbw x the collective's bus factor
// (2(n-1)/n for allreduce, (n-1)/n for allgather, ...) precisely so that it is the rate at which each
// rank's busiest link must carry bytes in a bandwidth-optimal (ring or pipelined) algorithm, whatever
// the rank count. So busbw, not algbw, is what a link's line rate bounds, and one bound serves every
// size and every n. Which link, and with what factor for the topology (hosts, ranks per host):
//
// - Across hosts (more than one host): every host's NICs carry its share of the ring, so busbw <= the
//   sum of its usable NICs' line rates / 8 (GB/s), the slowest host's (a collective ends when its
//   slowest rank does). Usable: for nccl the RDMA ports (InfiniBand, RoCE) when the host has any up,
//   else its Ethernet NICs (NCCL's socket transport); for CPU backends every wire a socket can use
//   (Ethernet, RoCE, IPoIB). A NIC whose own PCIe link moves less than its line rate counts at its
//   PCIe rate. Alltoall is not a ring: each of a host's g ranks sends (n-g)/n of its data off the host,
//   so busbw <= NICs x (n-1) / (g (n-g)); sendrecv sends one rank's stream per host boundary, so the
//   fastest single NIC bounds it. The practical figure beside the line rate is the field's rule of
//   thumb, about 24 GB/s of busbw per 200 Gb/s NIC (96% of line rate).
// - One host, nccl: the GPUs' NVLinks, links x GB/s per link (one direction) of the GPU with the fewest
//   active links; without NVLink (NVML says none), the slowest GPU's PCIe link. In-network reduction
//   (NVLink SHARP/NVLS on NVSwitch systems, SHARP on InfiniBand) moves fewer bytes than busbw assumes,
//   so allreduce can exceed this bound; the fraction then says so instead of being capped.
// - One host, CPU backends (shm, gloo, mpi): host memory, the zero-copy limit of docs/dev/benchmarks.md
//   ("the limit line", bench/micro/membw_probe.cpp) generalised to every collective: with B the host's
//   copy bandwidth (hw::HostHardware::memBwGBps; a copy of S bytes counts S) and A the copy traffic an ideal
//   in-place collective must do across all ranks, in units of the size S, busbw <= B x busFactor / A.
//   A = n for allreduce (each rank reads its 1/n slice from n buffers and writes the result to n:
//   busbw <= 2(n-1)B/n², the project's formula), n-1 for allgather, alltoall and broadcast, (n+1)/2 for
//   reduce_scatter and reduce (read n slices or buffers, write one), n for sendrecv.
//
// Unknown is a state of its own, with a sentence saying why (no hardware recorded, a NIC without a
// speed as virtio reports, NVML missing, memory bandwidth not measured); it is never a guess.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/host/hardware.h"
#include "reports/sweep/sweep_schema.h"

namespace ds::report {

struct RowBound {
  std::string kind;          // "nic", "nvlink", "pcie", "memory"; "" when unknown
  std::string name;          // "8x400 Gb/s InfiniBand line rate", "NVLink 18x25 GB/s", ...; "" unknown
  double gbps = 0;           // the most busbw (GB/s) the hardware allows this row; 0 unknown
  double practicalGBps = 0;  // the field's rule of thumb where one exists (NICs: 96% of line rate); else 0
  std::string host;          // the slowest host, whose hardware sets it; "" for one host or hosts alike
  double busBw = 0;          // the row's busbw compared (out-of-place when measured, else in-place)
  double fraction = 0;       // busBw / gbps; 0 when unknown or not measured
  std::string why;           // unknown: why, as a sentence; known: a remark (above the bound), or ""
  bool known() const { return gbps > 0; }
};

// The bound of `row` on the hardware `meta` recorded (meta.hardware, meta.hosts, meta.ranks). Pure.
RowBound rowBound(const SweepMeasurement& row, const SweepMetadata& meta);

// The "bound" object of a row's JSON: {"name", "kind", "gbps", "fraction", "practical_gbps", "host",
// "why"}; unknown: {"name": "unknown", "gbps": 0, "fraction": null, "why": ...}.
nlohmann::json boundToJson(const RowBound& b);

// '#' comment lines after a table of the nccl-tests text (its columns stay nccl-tests'): the bound once,
// then busbw and the fraction at the table's three largest sizes, per dtype and op:
//   # bound: 400 GB/s busbw = 8x400 Gb/s InfiniBand line rate (practical ~384 GB/s: ~24 GB/s per 200G NIC)
//   # bound: busbw 371.20 GB/s at 8 GiB = 93% of 8x400 Gb/s InfiniBand line rate
// or one "# bound: unknown: <why>" line. "" when the run recorded no hardware.
std::string formatBoundLines(const std::vector<SweepMeasurement>& rows, const SweepMetadata& meta);

// A host's hardware in one line for people: "8x400G infiniband + 1x1G ethernet; 8x NVIDIA H100 80GB HBM3,
// NVLink 18x25 GB/s, PCIe Gen5 x16; Intel(R) Xeon(R) Platinum 8480C; memory copy 40 GB/s".
std::string describeHardware(const hw::HostHardware& h);

}  // namespace ds::report

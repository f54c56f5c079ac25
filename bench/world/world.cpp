#include "bench/world/world.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "bench/exit_codes.h"
#include "bench/metadata.h"
#include "engine/comm/memory.h"
#include "engine/env/launcher_args.h"
#include "engine/env/world_json.h"
#include "engine/host/net.h"
#include "reports/json_io.h"
#include "reports/schema/deepspeed_view.h"
#include "reports/world_text.h"

namespace ds::bench {

report::RankRecord describeRank(World& world) {
  const auto& info = world.info();
  report::RankRecord r;
  r.rank = info.rank.value;
  r.worldSize = info.worldSize.value;
  r.localRank = info.localRank.value;
  r.localWorldSize = info.localWorldSize.value;
  r.nodeRank = info.nodeRank.value;
  r.host = net::hostName();
  r.pid = getpid();
  r.accelerator = world.accelerator().name();
  auto devices = world.accelerator().devices();
  int idx = world.accelerator().name() == "cpu" ? 0 : info.localRank.value;
  r.device = idx < static_cast<int>(devices.size())
                 ? fmt::format("{}:{} {}", r.accelerator, idx, devices[idx].name)
                 : fmt::format("{}:{}", r.accelerator, idx);
  r.backend = world.backend();
  r.jobId = info.jobId.value;
  if (const auto& arg = env::launcherLocalRankArg()) r.localRankArg = arg->value;
  r.provenance = info.describe();
  r.placement = coll::currentPlacement();
  return r;
}

std::vector<report::RankRecord> gatherWorld(World& world) {
  auto& store = world.store();
  nlohmann::json mine = describeRank(world);
  store.set(fmt::format("ds/world/{}", world.rank()), store::toBytes(mine.dump()));
  std::vector<std::string> keys;
  for (int r = 0; r < world.worldSize(); ++r) keys.push_back(fmt::format("ds/world/{}", r));
  std::vector<report::RankRecord> out;
  for (const auto& bytes : store.multiGet(keys)) {
    out.push_back(nlohmann::json::parse(store::toString(bytes)).get<report::RankRecord>());
  }
  return out;
}

report::SmokeResult smokeAllreduce(World& world) {
  report::SmokeResult s;
  s.ran = true;
  s.backend = world.backend();
  const double n = world.worldSize();
  s.expected = n * (n + 1) / 2;
  float value = static_cast<float>(world.rank() + 1);
  // On the group's own device: device memory for nccl (the job's transport, not a host stand-in),
  // host memory for the CPU backends. A failure to get or fill that memory is an error of the run,
  // never a silent pass.
  const comm::Device device = world.pg().options().device;
  auto memory = comm::makeMemory(device);
  comm::DeviceBuffer data(*memory, sizeof value);
  memory->toDevice(data.data(), &value, sizeof value);
  comm::Buffer b{data.data(), 1, comm::DType::kF32, device};
  auto work = world.pg().allreduce(b);
  work->wait();
  memory->toHost(&value, data.data(), sizeof value);
  s.got = value;
  s.ok = value == static_cast<float>(s.expected);
  s.micros = std::chrono::duration<double, std::micro>(work->duration()).count();
  return s;
}

namespace {

// dsperf's own rules, whatever --discovery says: DeepSpeed's view is compared with them (as dsdiag's
// env.deepspeed does), and only discovery's errors count, not the accelerator's or the timeout's.
std::vector<env::DsDifference> differencesFromDsperf(const InitOptions& init, const env::DeepSpeedView& view,
                                                     const env::EnvSource& env) {
  InitOptions mine = init;
  mine.discovery = Discovery::kDsperf;
  try {
    env::WorldInfo w = discoverWorldFor(mine, env);
    return env::deepspeedDifferences(view, &w, "", env);
  } catch (const ConfigError& e) {
    return env::deepspeedDifferences(view, nullptr, e.what(), env);
  }
}

}  // namespace

nlohmann::json dryRunJson(const InitOptions& init) {
  env::ProcessEnv env;
  nlohmann::json doc{{"schema", "dsperf.init_plan v1"}};
  try {
    InitPlan p = planInit(init);
    const auto& w = p.info;
    doc["discovery"] = discoveryName(p.discovery);
    auto& d = doc["dsperf"] = env::worldInfoJson(w);
    if (w.needsMpiMasterAddr) d["master_addr"] = nullptr;
    d["needs_mpi_master_addr"] = w.needsMpiMasterAddr;
    d["needs_mpi_local_ranks"] = w.needsMpiLocalRanks;
    d["notes"] = w.notes;
    d["accelerator"] = p.accelerator;
    d["backend"] = p.backend;
    d["timeout_s"] = p.timeout.count() / 1000;
    d["init_method"] = p.initMethod;
    doc["dsperf_error"] = nullptr;
  } catch (const ConfigError& e) {
    doc["dsperf"] = nullptr;
    doc["dsperf_error"] = e.what();
  }
  auto view = deepspeedViewFor(init, env);
  doc["deepspeed"] = report::deepspeedViewJson(view, differencesFromDsperf(init, view, env));
  return doc;
}

int runWorld(const WorldOptions& o) {
  InitOptions init;
  init.distBackend = o.backend;
  init.initMethod = o.initMethod;
  init.verbose = o.verbose;
  if (!o.discovery.empty()) init.discovery = parseDiscovery(o.discovery, "--discovery");
  if (o.timeoutSeconds > 0) init.timeout = std::chrono::seconds(o.timeoutSeconds);
  if (o.dryRun) {
    if (!o.jsonPath.empty()) report::writeJsonAtomic(o.jsonPath, dryRunJson(init));
    InitPlan plan = planInit(init);
    std::string text = report::formatInitPlan(plan);
    env::ProcessEnv env;
    auto view = deepspeedViewFor(init, env);
    auto diffs = differencesFromDsperf(init, view, env);
    text += fmt::format("#   deepspeed    deepspeed.init_distributed() would take path {} ({}): {}\n",
                        view.path, view.why,
                        diffs.empty() ? "the same world" : fmt::format("{} difference(s)", diffs.size()));
    for (const auto& d : diffs) text += fmt::format("#     {}\n", d.sentence);
    for (const auto& warning : view.warnings) text += fmt::format("#     {}\n", warning);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  auto world = initDistributed(init);
  world->barrier();
  auto ranks = gatherWorld(*world);
  report::SmokeResult smoke = smokeAllreduce(*world);
  if (world->rank() == 0) {
    std::string text = report::formatWorldTable(ranks) + report::formatSmoke(smoke);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!o.jsonPath.empty()) report::writeJsonAtomic(o.jsonPath, report::worldToJson(ranks, smoke));
  }
  destroyProcessGroup();
  return smoke.ok ? kExitOk : kExitWrongData;
}

}  // namespace ds::bench

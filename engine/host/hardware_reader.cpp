#include "engine/host/hardware_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "engine/host/pci_topology.h"

namespace ds::hw {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  auto notSpace = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), notSpace));
  s.erase(std::find_if(s.rbegin(), s.rend(), notSpace).base(), s.end());
  return s;
}

// The first line of a small sysfs file, trimmed; nullopt when it cannot be read (missing, a
// directory, EINVAL as `speed` of a down link answers). Reads at most 4 KiB: sysfs attributes are
// one page, and a fake tree's file may be anything.
std::optional<std::string> readAttr(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::string buf(4096, '\0');
  in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  if (in.bad()) return std::nullopt;
  buf.resize(static_cast<std::size_t>(in.gcount()));
  auto nl = buf.find('\n');
  if (nl != std::string::npos) buf.resize(nl);
  return trim(buf);
}

std::string attrOr(const fs::path& p, const std::string& fallback = "") {
  auto v = readAttr(p);
  return v ? *v : fallback;
}

// A whole decimal number and nothing else; nullopt for "", "x16", "1e3", "-".
std::optional<long long> parseInteger(const std::string& text) {
  std::string t = trim(text);
  if (t.empty() || t.size() > 20) return std::nullopt;
  std::size_t i = t[0] == '-' ? 1 : 0;
  if (i == t.size()) return std::nullopt;
  for (std::size_t k = i; k < t.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(t[k]))) return std::nullopt;
  try {
    return std::stoll(t);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A leading decimal number ("400", "2.5", "16.0") and the rest of the text.
std::optional<double> leadingNumber(const std::string& text, std::string* rest = nullptr) {
  std::string t = trim(text);
  std::size_t i = 0;
  bool digits = false, dot = false;
  while (i < t.size()) {
    char c = t[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
    ++i;
  }
  if (!digits || i > 16) return std::nullopt;
  double v = std::strtod(t.substr(0, i).c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  if (rest) *rest = trim(t.substr(i));
  return v;
}

// "0x15b3" -> "15b3"; "" when absent or not hex.
std::string hexId(const fs::path& p) {
  std::string v = attrOr(p);
  if (v.rfind("0x", 0) == 0 || v.rfind("0X", 0) == 0) v = v.substr(2);
  if (v.empty() || v.size() > 8) return "";
  for (char c : v)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return "";
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v;
}

// Where a `device` link leads, resolved; empty when it is absent or dangling.
fs::path resolved(const fs::path& link) {
  std::error_code ec;
  if (!fs::exists(link, ec)) return {};
  fs::path p = fs::canonical(link, ec);
  return ec ? fs::path{} : p;
}

// The PCI device a resolved device path is or sits under (virtio: .../0000:00:03.0/virtio2).
fs::path pciDeviceOf(fs::path p) {
  for (int depth = 0; depth < 4 && !p.empty() && p.has_filename(); ++depth) {
    if (isPciAddress(p.filename().string())) return p;
    p = p.parent_path();
  }
  return {};
}

std::string pciModel(const fs::path& dev) {
  std::string vendor = hexId(dev / "vendor"), device = hexId(dev / "device");
  if (vendor.empty()) return "";
  return device.empty() ? vendor : vendor + ":" + device;
}

// The link of a PCI device (a resolved path under <sysfs>/devices, or a plain folder in a fake tree).
std::optional<PcieLinkInfo> readPcieLink(const fs::path& dev, const std::string& name) {
  PcieLinkInfo l;
  l.device = name;
  l.address = dev.filename().string();
  int maxGen = pcieGenFromSpeed(attrOr(dev / "max_link_speed"));
  int curGen = pcieGenFromSpeed(attrOr(dev / "current_link_speed"));
  fs::path up = dev.parent_path();
  if (isPciAddress(up.filename().string())) {
    int upGen = pcieGenFromSpeed(attrOr(up / "max_link_speed"));
    if (upGen > 0) maxGen = maxGen > 0 ? std::min(maxGen, upGen) : 0;
  }
  l.gen = maxGen > 0 ? maxGen : curGen;
  auto width = parseInteger(attrOr(dev / "current_link_width"));
  if (!width || *width <= 0) width = parseInteger(attrOr(dev / "max_link_width"));
  l.width = width && *width > 0 && *width <= 32 ? static_cast<int>(*width) : 0;
  l.gBps = pcieGBps(l.gen, l.width);
  if (l.gen == 0 && l.width == 0) return std::nullopt;  // a virtual PCI device (a VM's virtio): no link
  return l;
}

std::vector<std::string> sortedEntries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string cpuModel(const std::string& procfs) {
  std::ifstream in(procfs + "/cpuinfo");
  std::string line;
  for (int n = 0; n < 200000 && std::getline(in, line); ++n) {
    // x86 "model name", ARM64 without it: nothing better than "unknown".
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = trim(line.substr(colon + 1));
    std::string out;  // runs of spaces ("Intel(R) Xeon(R) CPU   @ 2.2GHz") as one
    for (char c : v)
      if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
    return out.substr(0, 200);
  }
  return "";
}

bool isUp(const fs::path& iface) {
  std::string state = attrOr(iface / "operstate");
  if (state == "up") return true;
  // Drivers without operstate support say "unknown"; the carrier says whether the wire is live.
  return state == "unknown" && attrOr(iface / "carrier") == "1";
}

// The NICs readHostHardware lists, and the PCI function of each (RDMA devices by device name, netdevs
// by interface name; virtual ones have none).
struct NicScan {
  std::vector<NicInfo> nics;
  std::vector<NicPciDevice> pci;
};

NicScan scanNics(const fs::path& sys) {
  NicScan out;
  // RDMA ports first: their PCI devices' netdevs are the same wires.
  std::set<fs::path> rdmaDevices;
  const fs::path ib = sys / "class/infiniband";
  for (const auto& dev : sortedEntries(ib)) {
    fs::path devPath = resolved(ib / dev / "device");
    if (devPath.empty()) continue;  // soft RDMA (rxe, siw): its netdev is counted
    rdmaDevices.insert(devPath);
    fs::path pci = pciDeviceOf(devPath);
    if (!pci.empty()) out.pci.push_back({dev, true, pci});
    const std::string model = pci.empty() ? pciModel(devPath) : pciModel(pci);
    for (const auto& port : sortedEntries(ib / dev / "ports")) {
      const fs::path p = ib / dev / "ports" / port;
      NicInfo n;
      n.name = dev + "/" + port;
      std::string layer = attrOr(p / "link_layer", "InfiniBand");
      n.kind = layer == "Ethernet" ? "roce" : "infiniband";
      n.model = model;
      n.gbps = parseIbRate(attrOr(p / "rate")).value_or(0);
      // "4: ACTIVE"; the number is the state's (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE).
      n.up = attrOr(p / "state").find("ACTIVE") != std::string::npos;
      out.nics.push_back(std::move(n));
    }
  }

  const fs::path net = sys / "class/net";
  std::vector<NicInfo> virtualNics;
  for (const auto& iface : sortedEntries(net)) {
    const fs::path p = net / iface;
    const std::string type = attrOr(p / "type");
    if (iface == "lo" || type == "772") continue;  // ARPHRD_LOOPBACK
    NicInfo n;
    n.name = iface;
    n.up = isUp(p);
    n.gbps = parseNetSpeed(attrOr(p / "speed")).value_or(0);
    fs::path devPath = resolved(p / "device");
    if (devPath.empty()) {
      n.kind = "virtual";
      virtualNics.push_back(std::move(n));
      continue;
    }
    std::error_code ec;
    if (fs::exists(p / "device/physfn", ec)) continue;           // an SR-IOV VF beside its PF
    if (rdmaDevices.count(devPath)) continue;                    // the netdev face of an RDMA port
    if (type != "1" && type != "32" && !type.empty()) continue;  // not Ethernet (1) nor IPoIB (32)
    n.kind = type == "32" ? "infiniband" : "ethernet";
    fs::path pci = pciDeviceOf(devPath);
    // virtio's own vendor/device ("1af4:0001") say more than its PCI function's.
    n.model = pciModel(devPath);
    if (n.model.empty() && !pci.empty()) n.model = pciModel(pci);
    if (!pci.empty()) out.pci.push_back({iface, false, pci});
    out.nics.push_back(std::move(n));
  }
  if (out.nics.empty()) out.nics = std::move(virtualNics);
  return out;
}

}  // namespace

std::optional<double> parseIbRate(const std::string& text) {
  std::string rest;
  auto v = leadingNumber(text, &rest);
  if (!v || *v <= 0 || *v > 1e5) return std::nullopt;
  if (rest.rfind("Gb/sec", 0) != 0 && rest.rfind("Gb/s", 0) != 0) return std::nullopt;
  return *v;
}

std::optional<double> parseNetSpeed(const std::string& text) {
  auto v = parseInteger(text);
  // -1: unknown (virtio, a link without carrier); 4294967295: the same as an unsigned; above 10 Tb/s:
  // nonsense.
  if (!v || *v <= 0 || *v > 10'000'000) return std::nullopt;
  return static_cast<double>(*v) / 1000.0;
}

int pcieGenFromSpeed(const std::string& text) {
  std::string rest;
  auto v = leadingNumber(text, &rest);
  if (!v || rest.rfind("GT/s", 0) != 0) return 0;
  static const std::pair<double, int> kGens[] = {{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}};
  for (auto [rate, gen] : kGens)
    if (std::abs(*v - rate) < 0.01) return gen;
  return 0;
}

double pcieGBps(int gen, int width) {
  static const double kGTs[] = {0, 2.5, 5, 8, 16, 32, 64};
  if (gen < 1 || gen > 6 || width <= 0) return 0;
  const double encoding = gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0;
  return kGTs[gen] * encoding / 8.0 * width;
}

HardwareRoots hardwareRootsFromEnv(const std::string& prefix) {
  HardwareRoots r;
  if (const char* v = std::getenv((prefix + "_SYSFS").c_str()); v != nullptr && *v) r.sysfs = v;
  if (const char* v = std::getenv((prefix + "_PROCFS").c_str()); v != nullptr && *v) r.procfs = v;
  return r;
}

std::vector<NicPciDevice> readNicPciDevices(const HardwareRoots& roots) {
  return scanNics(fs::path(roots.sysfs)).pci;
}

std::optional<PcieLinkState> readPcieLinkState(const fs::path& dev) {
  PcieLinkState s;
  s.gen = pcieGenFromSpeed(attrOr(dev / "current_link_speed"));
  s.maxGen = pcieGenFromSpeed(attrOr(dev / "max_link_speed"));
  const fs::path up = dev.parent_path();
  if (isPciAddress(up.filename().string())) {
    const int upGen = pcieGenFromSpeed(attrOr(up / "max_link_speed"));
    if (upGen > 0 && s.maxGen > 0) s.maxGen = std::min(s.maxGen, upGen);
  }
  auto lanes = [&](const char* name) {
    auto w = parseInteger(attrOr(dev / name));
    return w && *w > 0 && *w <= 32 ? static_cast<int>(*w) : 0;
  };
  s.width = lanes("current_link_width");
  s.maxWidth = lanes("max_link_width");
  if (s.gen == 0 && s.maxGen == 0 && s.width == 0 && s.maxWidth == 0) return std::nullopt;
  return s;
}

HostHardware readHostHardware(const HardwareRoots& roots, GpuQuery* gpuQuery, const std::string& host) {
  HostHardware h;
  h.host = host;
  h.cpuModel = cpuModel(roots.procfs);
  const fs::path sys(roots.sysfs);

  NicScan scan = scanNics(sys);
  h.nics = std::move(scan.nics);
  std::map<std::string, fs::path> pciOfNic;  // NIC name (without port) -> its PCI device
  for (const auto& d : scan.pci) pciOfNic[d.name] = d.path;

  // GPUs: NVML's list, else sysfs' count.
  GpuView view;
  if (gpuQuery != nullptr) view = gpuQuery->query();
  const fs::path pciDevices = sys / "bus/pci/devices";
  if (view.loaded) {
    h.gpus = static_cast<int>(view.gpus.size());
    if (!view.gpus.empty()) h.gpuName = view.gpus.front().name;
    int minLinks = -1;
    for (std::size_t i = 0; i < view.gpus.size(); ++i) {
      const GpuFacts& g = view.gpus[i];
      minLinks = minLinks < 0 ? g.nvlinksActive : std::min(minLinks, g.nvlinksActive);
      const std::string name = fmt::format("gpu{}", i);
      fs::path dev = g.busId.empty() ? fs::path{} : resolved(pciDevices / g.busId);
      std::optional<PcieLinkInfo> link;
      if (!dev.empty()) link = readPcieLink(dev, name);
      if (!link && (g.pcieMaxGen > 0 || g.pcieWidth > 0)) {
        link = PcieLinkInfo{name, g.busId, g.pcieMaxGen, g.pcieWidth, pcieGBps(g.pcieMaxGen, g.pcieWidth)};
      }
      if (link) h.pcie.push_back(*link);
    }
    h.nvlink.links = std::max(minLinks, 0);
    if (h.nvlink.links > 0 && !view.gpus.empty())
      h.nvlink.gBpsPerLink = nvlinkGBpsPerLink(view.gpus.front().arch, view.gpus.front().name);
  } else {
    for (const auto& addr : sortedEntries(pciDevices)) {
      fs::path dev = resolved(pciDevices / addr);
      if (dev.empty()) dev = pciDevices / addr;
      const std::string cls = attrOr(dev / "class");
      if (hexId(dev / "vendor") != "10de") continue;
      if (cls.rfind("0x0300", 0) != 0 && cls.rfind("0x0302", 0) != 0) continue;
      if (auto link = readPcieLink(dev, fmt::format("gpu{}", h.gpus))) h.pcie.push_back(*link);
      ++h.gpus;
    }
  }

  // The NICs' PCIe links, once per PCI device.
  std::set<fs::path> seen;
  for (const auto& [name, pci] : pciOfNic) {
    if (!seen.insert(pci).second) continue;
    if (auto link = readPcieLink(pci, name)) h.pcie.push_back(*link);
  }
  return h;
}

}  // namespace ds::hw

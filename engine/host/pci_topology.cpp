#include "engine/host/pci_topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "engine/host/nvml_api.h"

namespace ds::hw {

namespace fs = std::filesystem;

namespace {

bool hexAt(const std::string& s, std::initializer_list<std::size_t> at) {
  return std::all_of(at.begin(), at.end(),
                     [&](std::size_t i) { return std::isxdigit(static_cast<unsigned char>(s[i])); });
}

// "pci0000:16": a PCI host bridge (root complex) under <sysfs>/devices.
bool isHostBridge(const std::string& s) {
  return s.size() == 10 && s.rfind("pci", 0) == 0 && s[7] == ':' && hexAt(s, {3, 4, 5, 6, 8, 9});
}

// The first line of a small sysfs attribute, without surrounding blanks; "" when unreadable.
std::string attr(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return "";
  std::ifstream in(p);
  std::string line;
  if (!std::getline(in, line) || line.size() > 4096) return "";
  auto notSpace = [](unsigned char c) { return !std::isspace(c); };
  line.erase(line.begin(), std::find_if(line.begin(), line.end(), notSpace));
  line.erase(std::find_if(line.rbegin(), line.rend(), notSpace).base(), line.end());
  return line;
}

int numaNodeOf(const fs::path& dev) {
  std::string v = attr(dev / "numa_node");
  if (v.empty() || v.size() > 6) return -1;
  for (char c : v)
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;  // "-1", garbage
  return std::stoi(v);
}

// A cpulist ("0-55,112-167") and nothing else; "" otherwise.
std::string cpuList(const fs::path& dev) {
  std::string v = attr(dev / "local_cpulist");
  if (v.size() > 512) return "";
  for (char c : v)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != ',' && c != '-') return "";
  return v;
}

}  // namespace

std::string pathKindText(PathKind k) {
  switch (k) {
    case PathKind::kSelf:
      return "X";
    case PathKind::kNvLink:
      return "NV";
    case PathKind::kPix:
      return "PIX";
    case PathKind::kPxb:
      return "PXB";
    case PathKind::kPhb:
      return "PHB";
    case PathKind::kNode:
      return "NODE";
    case PathKind::kSys:
      return "SYS";
    case PathKind::kUnknown:
      break;
  }
  return "?";
}

std::string pathText(const Path& p) {
  return p.kind == PathKind::kNvLink ? fmt::format("NV{}", p.nvlinks) : pathKindText(p.kind);
}

bool isPciAddress(const std::string& s) {
  return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.' &&
         hexAt(s, {0, 1, 2, 3, 5, 6, 8, 9, 11});
}

std::string sysfsPciAddress(const std::string& busId) {
  std::string s = busId;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  auto colon = s.find(':');
  if (colon == std::string::npos || colon > 8) return "";
  std::string domain = s.substr(0, colon);
  // NVML's 8 digits ("00000000") or sysfs' 4; a domain above 0xffff does not exist on Linux' PCI.
  if (domain.size() > 4) {
    if (domain.find_first_not_of('0') < domain.size() - 4) return "";
    domain = domain.substr(domain.size() - 4);
  }
  while (domain.size() < 4) domain = "0" + domain;
  std::string out = domain + s.substr(colon);
  return isPciAddress(out) ? out : "";
}

std::optional<PciPlace> pciPlaceOf(const fs::path& resolved) {
  std::vector<std::string> parts;
  for (const auto& c : resolved) parts.push_back(c.string());
  // The function is the last PCI address on the path (a virtio netdev lies below its function).
  auto dev = std::find_if(parts.rbegin(), parts.rend(), isPciAddress);
  if (dev == parts.rend()) return std::nullopt;
  const auto end = dev.base() - 1;  // iterator to the function
  auto bridge = std::find_if(std::make_reverse_iterator(end), parts.rend(), isHostBridge);
  PciPlace p;
  p.address = *end;
  if (bridge != parts.rend()) {
    p.hostBridge = *bridge;
    for (auto it = bridge.base(); it != end; ++it)
      if (isPciAddress(*it)) p.bridges.push_back(*it);
  }
  fs::path devPath;
  for (auto it = parts.begin(); it <= end; ++it) devPath /= *it;
  p.numaNode = numaNodeOf(devPath);
  p.cpus = cpuList(devPath);
  return p;
}

std::optional<PciPlace> readPciPlace(const std::string& sysfs, const std::string& busId) {
  const std::string address = sysfsPciAddress(busId);
  if (address.empty()) return std::nullopt;
  std::error_code ec;
  const fs::path link = fs::path(sysfs) / "bus/pci/devices" / address;
  if (!fs::exists(link, ec)) return std::nullopt;
  fs::path dev = fs::canonical(link, ec);
  if (ec) return std::nullopt;
  return pciPlaceOf(dev);
}

PathKind pciPath(const PciPlace& a, const PciPlace& b) {
  if (a.hostBridge.empty() || b.hostBridge.empty()) return PathKind::kUnknown;
  if (a.hostBridge != b.hostBridge) {
    return a.numaNode >= 0 && b.numaNode >= 0 && a.numaNode != b.numaNode ? PathKind::kSys : PathKind::kNode;
  }
  std::size_t common = 0;
  while (common < a.bridges.size() && common < b.bridges.size() && a.bridges[common] == b.bridges[common])
    ++common;
  if (common == 0) return PathKind::kPhb;  // different root ports of one host bridge
  // Below the deepest common bridge (a switch's upstream port), each side crosses at most its
  // downstream port: one switch.
  return a.bridges.size() - common <= 1 && b.bridges.size() - common <= 1 ? PathKind::kPix : PathKind::kPxb;
}

PathKind pathFromNvmlLevel(int level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
    case NVML_TOPOLOGY_SINGLE:
      return PathKind::kPix;
    case NVML_TOPOLOGY_MULTIPLE:
      return PathKind::kPxb;
    case NVML_TOPOLOGY_HOSTBRIDGE:
      return PathKind::kPhb;
    case NVML_TOPOLOGY_NODE:
      return PathKind::kNode;
    case NVML_TOPOLOGY_SYSTEM:
      return PathKind::kSys;
    default:
      return PathKind::kUnknown;
  }
}

Topology buildTopology(const TopologyFacts& f) {
  const std::size_t g = f.gpus.size(), n = f.nics.size(), all = g + n;
  Topology t;
  t.matrix.assign(all, std::vector<Path>(all));
  auto at = [](const std::vector<std::vector<int>>& m, std::size_t i, std::size_t j, int fallback) {
    return i < m.size() && j < m[i].size() ? m[i][j] : fallback;
  };
  auto placeOf = [&](std::size_t k) -> const PciPlace* {
    if (k >= g) return &f.nics[k - g].place;
    return f.gpus[k].place ? &*f.gpus[k].place : nullptr;
  };
  for (std::size_t i = 0; i < all; ++i) {
    for (std::size_t j = 0; j < all; ++j) {
      Path& p = t.matrix[i][j];
      if (i == j) {
        p.kind = PathKind::kSelf;
        continue;
      }
      if (i < g && j < g) {
        int links = std::max(at(f.directLinks, i, j, 0), at(f.directLinks, j, i, 0));
        if (f.gpus[i].fabricLinks > 0 && f.gpus[j].fabricLinks > 0)
          links += std::min(f.gpus[i].fabricLinks, f.gpus[j].fabricLinks);
        if (links > 0) {
          p = {PathKind::kNvLink, links};
          continue;
        }
        p.kind = pathFromNvmlLevel(at(f.nvmlLevel, i, j, -1));
        if (p.kind != PathKind::kUnknown) continue;
      }
      const PciPlace *a = placeOf(i), *b = placeOf(j);
      if (a != nullptr && b != nullptr) p.kind = pciPath(*a, *b);
    }
  }
  t.gpuNearestNics.resize(g);
  t.gpuNearestKind.assign(g, PathKind::kUnknown);
  t.nicNearestGpus.resize(n);
  for (std::size_t i = 0; i < g; ++i) {
    for (std::size_t k = 0; k < n; ++k) {
      PathKind kind = t.matrix[i][g + k].kind;
      if (kind == PathKind::kUnknown) continue;
      if (kind < t.gpuNearestKind[i]) {
        t.gpuNearestKind[i] = kind;
        t.gpuNearestNics[i].clear();
      }
      if (kind == t.gpuNearestKind[i]) t.gpuNearestNics[i].push_back(static_cast<int>(k));
    }
  }
  for (std::size_t k = 0; k < n; ++k) {
    PathKind best = PathKind::kUnknown;
    for (std::size_t i = 0; i < g; ++i) {
      PathKind kind = t.matrix[g + k][i].kind;
      if (kind == PathKind::kUnknown) continue;
      if (kind < best) {
        best = kind;
        t.nicNearestGpus[k].clear();
      }
      if (kind == best) t.nicNearestGpus[k].push_back(static_cast<int>(i));
    }
  }
  return t;
}

}  // namespace ds::hw

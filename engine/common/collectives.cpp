#include "engine/common/collectives.h"

namespace ds {

const CollectiveFacts* collectiveFacts(std::string_view name) {
  for (const CollectiveFacts* c : kCollectives) {
    if (name == c->name) return c;
  }
  return nullptr;
}

}  // namespace ds

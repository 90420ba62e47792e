#include "flow/miniflow.h"

namespace keel::flow {

void expand(const Miniflow& mf, FlowKey& out) {
  std::memset(&out, 0, sizeof out);
  uint64_t* w = out.words();
  unsigned i = 0;
  mf.map.for_each([&](unsigned word) { w[word] = mf.values[i++]; });
}

bool compress(const FlowKey& key, Miniflow& out) {
  FlowMap map;
  const uint64_t* w = key.words();
  for (unsigned i = 0; i < kFlowWords; ++i)
    if (w[i]) map.set(i);
  return compress(key, map, out);
}

bool compress(const FlowKey& key, const FlowMap& map, Miniflow& out) {
  if (map.count() > kMiniflowMaxWords) return false;
  const uint64_t* w = key.words();
  out.map = map;
  unsigned i = 0;
  map.for_each([&](unsigned word) { out.values[i++] = word < kFlowWords ? w[word] : 0; });
  return true;
}

}  // namespace keel::flow

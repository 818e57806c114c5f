// The registry of model families: one FamilyEntry per family folder, in the order the root
// CMakeLists.txt lists them (LFMVOX_FAMILIES). families.inc is generated from that list:
// LFMVOX_FAMILY(id) for each, id the family library's suffix (lfmvox_<id>).
#include <span>

#include "api/family.h"

namespace lfmvox {

#define LFMVOX_FAMILY(id) extern const FamilyEntry k_##id##_family;
#include "families.inc"
#undef LFMVOX_FAMILY

namespace {
#define LFMVOX_FAMILY(id) &k_##id##_family,
const FamilyEntry* const kFamilies[] = {
#include "families.inc"
};
#undef LFMVOX_FAMILY
}  // namespace

std::span<const FamilyEntry* const> Families() { return kFamilies; }

}  // namespace lfmvox

#include "tensor/tensor.h"

namespace lfmvox {

std::string Shape::ToString() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(dim[i]);
  }
  return s + "]";
}

}  // namespace lfmvox

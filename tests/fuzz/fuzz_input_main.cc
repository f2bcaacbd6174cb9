// The libFuzzer entry point of the targets whose input starts with a byte
// that picks a mode or carries flags (fuzz_support.h, fuzz_input): an empty
// input runs nothing. Linked into those targets only (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  if (size == 0) return 0;
  return authrpc::fuzz::fuzz_input(bytes[0],
                                   std::string_view(reinterpret_cast<const char*>(bytes) + 1, size - 1));
}

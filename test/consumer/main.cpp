// A consumer of an installed (or add_subdirectory'd) tapegrad, compiled with the target's own
// definitions; the other two units decide XTENSOR_USE_XSIMD themselves. Exits non-zero when any
// check of any unit fails.
#include <filesystem>
#include <iostream>
#include <string>

#include <tapegrad/version.hpp>

#include "checks.hpp"
#include "units.hpp"

namespace {

// save_npz/load_npz: libzip is private to tapegrad, so a static libtapegrad.a links only if
// the package config (or tapegrad.pc) brings libzip to this program's link.
int check_numpy_files(const tg::Tensor& t) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "tapegrad_consumer_check.npz").string();
  tg::save_npz(path, {{"layer/w", t}});
  const auto loaded = tg::load_npz(path);
  std::filesystem::remove(path);
  const bool same = loaded.size() == 1 && loaded[0].first == "layer/w" &&
                    loaded[0].second.array<double>() == t.array<double>();
  if (!same) std::cout << "consumer: save_npz/load_npz did not round-trip\n";
  return same ? 0 : 1;
}

// The headers' version macros agree with each other and, when CMake found the package, with the
// version its config file reported (0.2 at least: the package accepts find_package(tapegrad 0.2)).
int check_version() {
  const std::string from_parts = std::to_string(TAPEGRAD_VERSION_MAJOR) + "." +
                                 std::to_string(TAPEGRAD_VERSION_MINOR) + "." +
                                 std::to_string(TAPEGRAD_VERSION_PATCH);
  bool same = from_parts == TAPEGRAD_VERSION_STRING && TAPEGRAD_VERSION_MAJOR == 0 &&
              TAPEGRAD_VERSION_MINOR >= 2;
#ifdef TAPEGRAD_CONSUMER_PACKAGE_VERSION
  same = same && std::string(TAPEGRAD_CONSUMER_PACKAGE_VERSION) == TAPEGRAD_VERSION_STRING;
#endif
  if (!same) std::cout << "consumer: version macros disagree: " << TAPEGRAD_VERSION_STRING << '\n';
  return same ? 0 : 1;
}

}  // namespace

int main() {
  const tg::Tensor from_main(xt::xarray<double>{0.25, -8.0});
  int failures = run_consumer_checks("target definitions", from_main);
  failures += checks_with_own_xsimd(from_main);
  failures += checks_without_xsimd(from_main);
  failures += check_numpy_files(from_main);
  failures += check_version();
  // And the other way round: tensors made in those units, read here.
  failures += run_consumer_checks("target definitions, tensor from the unit without xsimd",
                                  tensor_from_unit_without_xsimd());
  std::cout << "consumer: " << (failures == 0 ? "all checks passed" : "FAILED") << '\n';
  return failures == 0 ? 0 : 1;
}

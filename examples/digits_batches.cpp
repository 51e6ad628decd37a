// Batches of the digits for the examples' training loops.
#include "digits_batches.hpp"

#include <algorithm>

namespace digits {

Examples to_examples(const Dataset& data) {
  Examples out;
  out.features = xt::xarray<float>::from_shape({data.size(), kPixels});
  std::transform(data.pixels.begin(), data.pixels.end(), out.features.begin(),
                 [](std::uint8_t p) { return static_cast<float>(p) / kMaxPixelValue; });
  out.labels.assign(data.labels.begin(), data.labels.end());
  return out;
}

std::pair<tapegrad::Tensor, tapegrad::Tensor> make_batch(const Examples& examples,
                                                         const std::vector<std::size_t>& order,
                                                         std::size_t first, std::size_t count) {
  auto features = xt::xarray<float>::from_shape({count, kPixels});
  xt::xarray<float> one_hot = xt::zeros<float>({count, std::size_t{kClasses}});
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t row = order[first + i];
    std::copy_n(examples.features.data() + row * kPixels, kPixels, features.data() + i * kPixels);
    one_hot(i, static_cast<std::size_t>(examples.labels[row])) = 1.0f;
  }
  return {tapegrad::Tensor(std::move(features)), tapegrad::Tensor(std::move(one_hot))};
}

std::size_t count_correct(const tapegrad::Tensor& logits, const std::vector<int>& labels,
                          const std::vector<std::size_t>& order, std::size_t first) {
  const auto& values = logits.array<float>();
  const std::size_t rows = values.shape()[0];
  std::size_t correct = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const float* row = values.data() + i * kClasses;
    const auto predicted = std::max_element(row, row + kClasses) - row;
    if (predicted == labels[order[first + i]]) ++correct;
  }
  return correct;
}

}  // namespace digits

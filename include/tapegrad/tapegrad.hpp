// tapegrad: eager, tape-based reverse-mode automatic differentiation on xtensor arrays.
// The one header a user includes.
#pragma once

#include "tapegrad/check.hpp"
#include "tapegrad/custom_gradient.hpp"
#include "tapegrad/diagnostics.hpp"
#include "tapegrad/dtype.hpp"
#include "tapegrad/errors.hpp"
#include "tapegrad/forward.hpp"
#include "tapegrad/functional.hpp"
#include "tapegrad/indexed_slices.hpp"
#include "tapegrad/ops/array.hpp"
#include "tapegrad/ops/linalg.hpp"
#include "tapegrad/ops/math.hpp"
#include "tapegrad/ops/nn.hpp"
#include "tapegrad/ops/random.hpp"
#include "tapegrad/ops/reduce.hpp"
#include "tapegrad/optim.hpp"
#include "tapegrad/registry.hpp"
#include "tapegrad/tape.hpp"
#include "tapegrad/tensor.hpp"
#include "tapegrad/variable.hpp"
#include "tapegrad/variables_functional.hpp"

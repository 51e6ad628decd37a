#include "evals/evals.hpp"

namespace tapegrad::gradbench {

const std::map<std::string, EvalFunctions>& all_evals() {
  static const std::map<std::string, EvalFunctions> evals{
      {"hello", hello_functions()},   {"llsq", llsq_functions()},
      {"lse", lse_functions()},       {"ode", ode_functions()},
      {"kmeans", kmeans_functions()}, {"gmm", gmm_functions()},
      {"lstm", lstm_functions()},     {"det", det_functions()},
      {"ba", ba_functions()},         {"ht", ht_functions()},
      {"saddle", saddle_functions()}, {"particle", particle_functions()},
  };
  return evals;
}

}  // namespace tapegrad::gradbench

// Tensor ids: unique for the process, handed out without a contended atomic per tensor, and
// able to answer "was this tensor created on this thread since then?".
#pragma once

#include <cstddef>
#include <cstdint>

namespace tapegrad::detail {

// A fresh id (never 0). Each thread takes ids from blocks of its own, so ids are unique but
// not ordered across threads: a tensor made later on another thread may have a smaller id, or
// a larger one than every id this thread has handed out.
std::uint64_t next_tensor_id();

// For its lifetime, notes the ids this thread hands out, so that created_here() can tell a
// tensor made on this thread inside the scope from any other (an earlier one, or one made on
// another thread, whatever its id). Marks nest; owner thread only.
class IdMark {
 public:
  IdMark();
  ~IdMark();
  IdMark(const IdMark&) = delete;
  IdMark& operator=(const IdMark&) = delete;

  // True when `id` was handed out on this thread since the mark was set.
  bool created_here(std::uint64_t id) const;

 private:
  std::uint64_t first_;       // the next id of this thread's block when the mark was set
  std::uint64_t block_end_;   // that block's end
  std::size_t later_blocks_;  // where the blocks taken since the mark start in the thread's list
};

}  // namespace tapegrad::detail

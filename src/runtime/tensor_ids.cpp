#include "runtime/tensor_ids.hpp"

#include <atomic>
#include <vector>

namespace tapegrad::detail {
namespace {

// Ids come from a process-wide counter in blocks, so the common case is a thread-local
// increment rather than a contended atomic.
constexpr std::uint64_t kIdBlock = 1 << 16;
std::atomic<std::uint64_t> next_id_block{1};

// This thread's block: trivial thread_locals, so next_tensor_id needs no initialisation check.
thread_local std::uint64_t next_id = 0;
thread_local std::uint64_t block_end = 0;
thread_local int marks = 0;

// While any IdMark is alive on the thread: the start of every block taken since the outermost
// one was set (one per 65,536 tensors; cleared when the outermost mark ends).
std::vector<std::uint64_t>& blocks_since_mark() {
  thread_local std::vector<std::uint64_t> blocks;
  return blocks;
}

}  // namespace

std::uint64_t next_tensor_id() {
  if (next_id == block_end) {
    next_id = next_id_block.fetch_add(kIdBlock, std::memory_order_relaxed);
    block_end = next_id + kIdBlock;
    if (marks > 0) blocks_since_mark().push_back(next_id);
  }
  return next_id++;
}

IdMark::IdMark()
    : first_(next_id), block_end_(block_end), later_blocks_(blocks_since_mark().size()) {
  ++marks;
}

IdMark::~IdMark() {
  if (--marks == 0) blocks_since_mark().clear();
}

bool IdMark::created_here(std::uint64_t id) const {
  if (id >= first_ && id < block_end_) return true;  // the rest of the block the mark began in
  const std::vector<std::uint64_t>& blocks = blocks_since_mark();
  for (std::size_t i = later_blocks_; i < blocks.size(); ++i) {
    if (id >= blocks[i] && id < blocks[i] + kIdBlock) return true;
  }
  return false;
}

}  // namespace tapegrad::detail

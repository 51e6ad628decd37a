// Tensors to and from NumPy's file formats: .npy (one array) and .npz (a zip of named .npy
// members). The files are NumPy's own: numpy.load reads what these functions write, and they
// read what numpy.save, numpy.savez and numpy.savez_compressed write.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tapegrad {

/// Writes `tensor` to `path` as a .npy file (numpy.save): format version 1.0, little-endian,
/// C order, dtype '<f4', '<f8', '<i4', '<i8' or '|b1' for float32, float64, int32, int64,
/// bool; any rank, including scalars and shapes with a zero.
/// The write is atomic: the bytes go to a new temporary file in the same folder, are flushed
/// to disk (fsync), and renamed over `path`: a crash leaves the old file or the new one, whole.
/// A new file's mode is 0666 & ~umask; a symbolic link at `path` is replaced, not followed.
/// Throws InvalidArgument naming save_npy and `path` when the tensor is undefined or a
/// Variable's handle (pass variable.value()), or when the file cannot be written (a missing
/// folder, no permission, a full disk: the message has the system's reason).
void save_npy(const std::string& path, const Tensor& tensor);

/// Reads a .npy file (numpy.load of a .npy): versions 1.0, 2.0 and 3.0, dtype '<f4', '<f8',
/// '<i4', '<i8' or '|b1', any rank, C or Fortran order (a Fortran-order file's elements are
/// put in row-major order: the tensor has the shape and values NumPy shows). The result is a
/// new constant tensor.
/// Throws InvalidArgument naming load_npy and `path` for a file that does not exist or cannot
/// be read, and for one that is not such a .npy file: a wrong magic string or version, a
/// malformed header, a dtype tapegrad has no equivalent for (big-endian, other widths,
/// unsigned, complex, object or structured arrays: the message quotes the 'descr'), a bool
/// element that is neither 0 nor 1, or a data size that is not the shape's (a truncated file,
/// trailing bytes). The data are never allocated before the file is known to hold them.
Tensor load_npy(const std::string& path);

/// Writes named tensors to `path` as a .npz file (numpy.savez): a zip archive, members stored
/// uncompressed, in the given order, tensor "w" as member "w.npy" (each a .npy file as
/// save_npy writes it). Names may contain '/' ("conv1/kernel" is member "conv1/kernel.npy",
/// and numpy.load gives it back as "conv1/kernel"). Atomic like save_npy.
/// Throws InvalidArgument naming save_npz, `path` and the entry for an empty name, a name
/// with a NUL character, a name given twice, an undefined tensor or a Variable's handle, and
/// naming save_npz and `path` when the file cannot be written.
void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors);

/// Reads a .npz file (numpy.load of a .npz) written by save_npz, numpy.savez or
/// numpy.savez_compressed (members stored or deflated): the named tensors in the archive's
/// order, each name without its ".npy" suffix. Folder entries (names ending in '/') are
/// skipped.
/// Throws InvalidArgument naming load_npz and `path` for a file that does not exist or is not
/// a zip archive, and naming the entry as well for a member that is not a .npy file as
/// load_npy reads it, a member whose data do not match the sizes and checksum the archive
/// records for it, an encrypted member, a compression method other than stored or deflate, or
/// a name that appears twice.
std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path);

}  // namespace tapegrad

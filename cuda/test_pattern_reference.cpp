// SPDX-License-Identifier: LGPL-2.1-or-later
// CPU references of the kernels in test_pattern.cu: the same math, written for clarity, used as the
// oracle of the GPU tests (and usable wherever a frame must be checked without a GPU).
#include <cstddef>
#include <cstdint>

#include "test_pattern.h"

namespace cipc_cuda {

// The checksum
//
//   S = sum_{r < rows} sum_{c < row_bytes} byte(r, c) * (c + 1) * W(r),   W(r) = (r + 1) * K,
//   K = 0x9E3779B97F4A7C15 (2^64 / golden ratio),
//
// is computed in uint64_t, i.e. in the ring of integers modulo 2^64. Because that is a ring,
// multiplication distributes over addition and addition is associative and commutative, so
//
//   S = sum_r W(r) * R(r),   R(r) = sum_c byte(r, c) * (c + 1)    (all mod 2^64)
//
// holds exactly, whatever the order or grouping of the additions. That is what makes the result
// independent of how the GPU splits the work: test_pattern.cu computes each R(r) as a block
// reduction, multiplies it by W(r) into scratch[r] (pass 1) and adds the scratch entries
// (pass 2); here we add the same terms row by row. Wrapping on overflow is intended and
// well defined for unsigned arithmetic.
//
// What it detects: a byte at (r, c) has weight w(r, c) = (c + 1) * (r + 1) * K. K is odd, hence
// invertible mod 2^64, so two positions have the same weight exactly when (c + 1) * (r + 1) is
// the same number for both. Swapping two different bytes changes S by (b_p - b_q) * (w_q - w_p);
// within one row the weights differ, and since |b_p - b_q| < 2^8 the product can only vanish
// mod 2^64 when (c_p - c_q) * (r + 1) is a multiple of 2^56 - never for real frames. Swapping
// whole rows changes S unless the rows have the same R(r). The blind spot of this formula:
// positions with equal (c + 1) * (r + 1) in different rows, e.g. (r 0, c 1) and (r 1, c 0),
// weigh the same, so exchanging just those two bytes leaves S unchanged.
// Padding (bytes from row_bytes to pitch) never enters the sum.
uint64_t image_checksum_cpu(const uint8_t* image, size_t pitch, size_t row_bytes, size_t rows) {
  constexpr uint64_t kRowWeight = 0x9E3779B97F4A7C15ull;
  if (!image || rows == 0 || row_bytes == 0) return 0;
  uint64_t total = 0;
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* row = image + r * pitch;
    uint64_t row_sum = 0;  // R(r)
    for (size_t c = 0; c < row_bytes; ++c)
      row_sum += static_cast<uint64_t>(row[c]) * static_cast<uint64_t>(c + 1);
    total += row_sum * (static_cast<uint64_t>(r + 1) * kRowWeight);
  }
  return total;
}

// The fill pattern
//
//   byte(r, c) = (uint8_t)((c * 2654435761 ^ r * 40503 ^ seed * 2246822519) >> 13)
//
// in uint32_t arithmetic (so column and row indices are taken mod 2^32, and every product wraps
// mod 2^32). 2654435761 and 2246822519 are the multiplicative-hashing primes of Knuth and
// xxHash; multiplying spreads the low bits of c, r and seed upwards, the XOR combines them and
// the shift by 13 picks bits 13..20 of the result, which depend on all three inputs. Consecutive
// columns, rows and seeds therefore give visibly different, deterministic bytes: a frame whose
// rows were swapped, shifted or taken from another seed (frame) does not match.
// Bytes from row_bytes to pitch (padding) are not written.
void fill_pattern_cpu(uint8_t* image, size_t pitch, size_t row_bytes, size_t rows, uint32_t seed) {
  if (!image || rows == 0 || row_bytes == 0) return;
  const uint32_t seed_term = seed * 2246822519u;
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* row = image + r * pitch;
    const uint32_t row_term = static_cast<uint32_t>(r) * 40503u;
    for (size_t c = 0; c < row_bytes; ++c)
      row[c] = static_cast<uint8_t>(
          ((static_cast<uint32_t>(c) * 2654435761u) ^ row_term ^ seed_term) >> 13);
  }
}

}  // namespace cipc_cuda

// Packing and decoding against their definitions, on every Highway target
// this CPU runs (the packers' inner steps, interleave and bf16 widening,
// are compiled per target):
//  - decode_span: every storage dtype (f32, bf16, f16, fp8 e4m3/e5m2, int8)
//    times every scale layout (none, per tensor, per row, per column, blocks
//    along columns and rows), with an output stride;
//  - widen_bf16 / widen_bf16_panels: every count and ragged panel;
//  - pack_a, pack_a_transposed (with the valid-token mask) and pack_b (both
//    orientations): element (i, p) of the panels is the decoded source
//    element, bit for bit; padding rows/columns are zero; nothing is written
//    past the packed size;
//  - the bf16 pair packers (bf16_pack.h): the pair layout, odd depths and
//    the k_end mask, raw bits copied.
// Element definition: value(r, c) = decode(code(r, c)) * scale.at(r, c).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/bf16_microkernel.h"
#include "kernels/bf16_pack.h"
#include "kernels/decode.h"
#include "kernels/microkernel.h"
#include "kernels/pack.h"
#include "kernels/row_panels.h"
#include "kernels/widen.h"
#include "raggemm/dtype.h"
#include "raggemm/fp8.h"
#include "support/every_target.h"

namespace raggemm::kernels {
namespace {

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

constexpr float kSentinel = -777.0f;

// A rows x cols source of `dtype` with random codes (fp8 NaN codes left
// out: NaN != NaN would only confuse the comparison) and its scales.
struct Source {
  DType dtype;
  int64_t rows, cols, ld;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  Operand op;

  float code_value(int64_t r, int64_t c) const {
    const int64_t at = r * ld + c;
    switch (dtype) {
      case DType::kF32: {
        float v;
        std::memcpy(&v, bytes.data() + 4 * at, 4);
        return v;
      }
      case DType::kBF16:
      case DType::kF16: {
        uint16_t v;
        std::memcpy(&v, bytes.data() + 2 * at, 2);
        return dtype == DType::kBF16 ? bf16_to_f32(v) : f16_to_f32(v);
      }
      case DType::kF8E4M3:
        return fp8_e4m3_to_f32(bytes[at]);
      case DType::kF8E5M2:
        return fp8_e5m2_to_f32(bytes[at]);
      case DType::kI8:
        return static_cast<float>(static_cast<int8_t>(bytes[at]));
      default:
        return 0;
    }
  }
  float value(int64_t r, int64_t c) const {
    const float v = code_value(r, c);
    return op.scale.data ? v * op.scale.at(r, c) : v;
  }
};

enum class Layout { kNone, kTensor, kRow, kColumn, kColumnBlocks, kRowBlocks };
const char* layout_name(Layout l) {
  const char* names[] = {"none", "tensor", "row", "column", "column_blocks", "row_blocks"};
  return names[static_cast<int>(l)];
}

Source make_source(DType dtype, Layout layout, int64_t rows, int64_t cols, uint32_t seed) {
  Source s{dtype, rows, cols, cols + 3, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t count = rows * s.ld;
  const size_t size = dtype_size(dtype);
  s.bytes.resize(static_cast<size_t>(count) * size);
  for (int64_t i = 0; i < count; ++i) {
    const float v = normal(rng);
    if (dtype == DType::kF32) std::memcpy(s.bytes.data() + 4 * i, &v, 4);
    if (dtype == DType::kBF16 || dtype == DType::kF16) {
      const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(s.bytes.data() + 2 * i, &h, 2);
    }
    if (dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2 || dtype == DType::kI8) {
      uint8_t code = static_cast<uint8_t>(byte(rng));
      const bool nan = (dtype == DType::kF8E4M3 && (code & 0x7F) == 0x7F) ||
                       (dtype == DType::kF8E5M2 && (code & 0x7F) > 0x7C);
      if (nan) code = static_cast<uint8_t>(code & 0x80);
      s.bytes[static_cast<size_t>(i)] = code;
    }
  }
  OperandScale& sc = s.op.scale;
  std::uniform_real_distribution<float> scale(0.25f, 2.0f);
  auto fill = [&](int64_t n) {
    s.scales.resize(static_cast<size_t>(n));
    for (float& v : s.scales) v = scale(rng);
  };
  switch (layout) {
    case Layout::kNone:
      break;
    case Layout::kTensor:
      fill(1);
      break;
    case Layout::kRow:
      fill(rows);
      sc.row_stride = 1;
      break;
    case Layout::kColumn:
      fill(cols);
      sc.col_stride = 1;
      break;
    case Layout::kColumnBlocks:  // [rows, ceil(cols / 32)]
      fill(rows * ((cols + 31) / 32));
      sc.row_stride = (cols + 31) / 32;
      sc.col_stride = 1;
      sc.col_block = 32;
      break;
    case Layout::kRowBlocks:  // [ceil(rows / 32), cols]
      fill(((rows + 31) / 32) * cols);
      sc.row_block = 32;
      sc.row_stride = cols;
      sc.col_stride = 1;
      break;
  }
  if (layout != Layout::kNone) sc.data = s.scales.data();
  s.op.data = s.bytes.data();
  s.op.dtype = dtype;
  s.op.ld = s.ld;
  return s;
}

const DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E5M2,
                         DType::kI8};
const Layout kLayouts[] = {Layout::kNone,   Layout::kTensor,       Layout::kRow,
                           Layout::kColumn, Layout::kColumnBlocks, Layout::kRowBlocks};

// fn(the target's f32 microkernel) on every runnable target.
template <class Fn>
void on_every_target(Fn fn) {
  testing::on_every_target([&] { fn(select_microkernel()); });
}

TEST(DecodeContract, SpanEveryDtypeEveryScaleLayoutEveryTarget) {
  on_every_target([](const Microkernel&) {
    for (DType dtype : kDtypes) {
      for (Layout layout : kLayouts) {
        const Source s = make_source(dtype, layout, 70, 75, 1);
        for (int64_t stride : {1, 3}) {
          for (int64_t r : {0, 33, 69}) {
            const int64_t c0 = 5, count = 70;
            std::vector<float> out(static_cast<size_t>(count * stride + 1), kSentinel);
            decode_span(s.op, r, c0, count, out.data(), stride);
            for (int64_t j = 0; j < count; ++j) {
              ASSERT_EQ(bits(out[j * stride]), bits(s.value(r, c0 + j)))
                  << dtype_name(dtype) << " " << layout_name(layout) << " stride " << stride
                  << " r " << r << " c " << c0 + j;
            }
            ASSERT_EQ(out[count * stride], kSentinel) << "wrote past count";
          }
        }
      }
    }
  });
}

TEST(DecodeContract, WidenBf16EveryCountAndPanelEveryTarget) {
  on_every_target([](const Microkernel&) {
    const Source s = make_source(DType::kBF16, Layout::kNone, 9, 70, 2);
    const uint16_t* src = reinterpret_cast<const uint16_t*>(s.bytes.data());
    for (int64_t count = 0; count <= 70; ++count) {
      std::vector<float> out(static_cast<size_t>(count + 1), kSentinel);
      widen_bf16(src, count, out.data());
      for (int64_t j = 0; j < count; ++j) ASSERT_EQ(bits(out[j]), bits(s.value(0, j))) << count;
      ASSERT_EQ(out[count], kSentinel);
    }
    for (int nr : {8, 16, 32}) {
      for (int64_t cols : {1, 7, 16, 33, 70}) {
        const int64_t rows = 9, panels = (cols + nr - 1) / nr;
        std::vector<float> dst(static_cast<size_t>(panels * nr * rows + 1), kSentinel);
        widen_bf16_panels(src, s.ld, rows, cols, nr, dst.data());
        for (int64_t q = 0; q < panels; ++q) {
          for (int64_t p = 0; p < rows; ++p) {
            for (int j = 0; j < nr; ++j) {
              const int64_t col = q * nr + j;
              const float got = dst[static_cast<size_t>(q * nr * rows + p * nr + j)];
              if (col < cols) {
                ASSERT_EQ(bits(got), bits(s.value(p, col))) << nr << " " << cols;
              } else {
                ASSERT_EQ(got, 0.0f) << "padding column " << col;
              }
            }
          }
        }
        ASSERT_EQ(dst.back(), kSentinel);
      }
    }
  });
}

// Element (i, p) of panels of `width` (pack_b layout): panel i / width,
// then dst[panel * width * depth + p * width + i % width].
float panel_at(const std::vector<float>& dst, int width, int64_t depth, int64_t i, int64_t p) {
  return dst[static_cast<size_t>((i / width) * width * depth + p * width + i % width)];
}

// Slot (panel, row within the panel) of pack_a's rows dealt evenly
// (kernels/row_panels.h), written out here without RowPanels: ceil(rows / mr)
// panels, the first rows % panels of them one row taller.
struct ASlot {
  int64_t panel, row;
};
std::vector<ASlot> even_slots(int64_t rows, int mr) {
  std::vector<ASlot> slots;
  const int64_t panels = (rows + mr - 1) / mr;
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t height = rows / panels + (panel < rows % panels ? 1 : 0);
    for (int64_t r = 0; r < height; ++r) slots.push_back({panel, r});
  }
  return slots;
}

// Element (panel, slot row, p) of pack_a's layout.
float a_slot_at(const std::vector<float>& dst, int mr, int64_t depth, int64_t panel, int64_t row,
                int64_t p) {
  return dst[static_cast<size_t>(panel * mr * depth + p * mr + row)];
}

// Every slot of a panel past its rows is zero.
void expect_padding_zero(const std::vector<float>& dst, const std::vector<ASlot>& slots, int mr,
                         int64_t kc) {
  const int64_t panels = slots.back().panel + 1;
  for (int64_t panel = 0; panel < panels; ++panel) {
    int64_t height = 0;
    for (const ASlot& slot : slots) height += slot.panel == panel ? 1 : 0;
    for (int64_t row = height; row < mr; ++row) {
      for (int64_t p = 0; p < kc; ++p) {
        ASSERT_EQ(a_slot_at(dst, mr, kc, panel, row, p), 0.0f)
            << "padding row " << row << " of panel " << panel;
      }
    }
  }
}

TEST(PackContract, ARowsDealtEvenlyOverThePanels) {
  // 32 rows at MR 6: 6, 6, 5, 5, 5, 5 (not five full panels and a 2-row one).
  const std::vector<ASlot> s32 = even_slots(32, 6);
  ASSERT_EQ(s32.size(), 32u);
  EXPECT_EQ(s32[11].panel, 1);
  EXPECT_EQ(s32[12].panel, 2);
  EXPECT_EQ(s32[31].panel, 5);
  EXPECT_EQ(s32[31].row, 4);
  const RowPanels split = row_panels(32, 6);
  EXPECT_EQ(split.count, 6);
  for (int64_t panel = 0; panel < split.count; ++panel) {
    EXPECT_EQ(split.rows(panel), panel < 2 ? 6 : 5) << panel;
  }
  for (int64_t rows = 1; rows <= 60; ++rows) {
    for (int mr : {6, 12}) {
      const RowPanels r = row_panels(rows, mr);
      const std::vector<ASlot> slots = even_slots(rows, mr);
      ASSERT_EQ(r.count, slots.back().panel + 1) << rows << " " << mr;
      for (int64_t i = 0; i < rows; ++i) {
        const ASlot& slot = slots[static_cast<size_t>(i)];
        ASSERT_GE(i, r.first_row(slot.panel));
        ASSERT_EQ(i - r.first_row(slot.panel), slot.row) << rows << " " << mr << " " << i;
        ASSERT_LE(r.rows(slot.panel), mr);
      }
    }
  }
  EXPECT_EQ(row_panels(0, 6).count, 0);
}

TEST(PackContract, PackAEveryDtypeEveryScaleLayoutEveryTarget) {
  on_every_target([](const Microkernel& uk) {
    for (DType dtype : kDtypes) {
      for (Layout layout : kLayouts) {
        const Source s = make_source(dtype, layout, 60, 300, 3);
        for (int mr : {6, uk.mr}) {
          for (int64_t rows : {int64_t{1}, int64_t{mr - 1}, int64_t{2 * mr + 3}}) {
            if (rows < 1) continue;
            for (int64_t kc : {1, 7, 270}) {  // 270: past a decode chunk of 256
              const int64_t r0 = 3, k0 = 5;
              const int64_t size = packed_size(rows, kc, mr);
              std::vector<float> dst(static_cast<size_t>(size + 1), kSentinel);
              pack_a(s.op, r0, rows, k0, kc, mr, dst.data());
              const std::vector<ASlot> slots = even_slots(rows, mr);
              for (int64_t i = 0; i < rows; ++i) {
                const ASlot& slot = slots[static_cast<size_t>(i)];
                for (int64_t p = 0; p < kc; ++p) {
                  ASSERT_EQ(bits(a_slot_at(dst, mr, kc, slot.panel, slot.row, p)),
                            bits(s.value(r0 + i, k0 + p)))
                      << dtype_name(dtype) << " " << layout_name(layout) << " mr " << mr
                      << " rows " << rows << " kc " << kc << " (" << i << "," << p << ")";
                }
              }
              expect_padding_zero(dst, slots, mr, kc);
              ASSERT_EQ(dst.back(), kSentinel) << "wrote past the packed size";
            }
          }
        }
      }
    }
  });
}

TEST(PackContract, PackATransposedMasksTokensEveryTarget) {
  on_every_target([](const Microkernel& uk) {
    for (DType dtype : kDtypes) {
      for (Layout layout : kLayouts) {
        const Source s = make_source(dtype, layout, 80, 50, 4);  // tokens x K
        const int mr = uk.mr;
        const int64_t t0 = 2, kc = 70, c0 = 4, rows = 2 * mr + 1;
        if (c0 + rows > s.cols) continue;
        const int64_t valid_begin = 9, valid_end = 60;
        std::vector<float> dst(static_cast<size_t>(packed_size(rows, kc, mr) + 1), kSentinel);
        pack_a_transposed(s.op, t0, kc, c0, rows, valid_begin, valid_end, mr, dst.data());
        const std::vector<ASlot> slots = even_slots(rows, mr);
        for (int64_t i = 0; i < rows; ++i) {
          const ASlot& slot = slots[static_cast<size_t>(i)];
          for (int64_t p = 0; p < kc; ++p) {
            const int64_t t = t0 + p;
            const bool valid = t >= valid_begin && t < valid_end;
            const float got = a_slot_at(dst, mr, kc, slot.panel, slot.row, p);
            ASSERT_EQ(bits(got), bits(valid ? s.value(t, c0 + i) : 0.0f))
                << dtype_name(dtype) << " " << layout_name(layout) << " (" << i << "," << p << ")";
          }
        }
        expect_padding_zero(dst, slots, mr, kc);
        ASSERT_EQ(dst.back(), kSentinel);
      }
    }
  });
}

TEST(PackContract, PackBBothOrientationsEveryDtypeEveryTarget) {
  on_every_target([](const Microkernel& uk) {
    for (DType dtype : kDtypes) {
      for (Layout layout : kLayouts) {
        const Source s = make_source(dtype, layout, 90, 80, 5);
        for (bool transposed : {false, true}) {
          for (int nr : {8, uk.nr}) {
            for (int64_t cols : {int64_t{1}, int64_t{nr + 3}, int64_t{2 * nr}}) {
              const int64_t k0 = 3, kc = 40, n0 = 6;
              if (n0 + cols > (transposed ? s.rows : s.cols)) continue;
              const int64_t panels = (cols + nr - 1) / nr;
              std::vector<float> dst(static_cast<size_t>(panels * nr * kc + 1), kSentinel);
              pack_b(s.op, transposed, k0, kc, n0, cols, nr, dst.data());
              for (int64_t j = 0; j < panels * nr; ++j) {
                for (int64_t p = 0; p < kc; ++p) {
                  const float got = panel_at(dst, nr, kc, j, p);
                  const float want = j >= cols   ? 0.0f
                                     : transposed ? s.value(n0 + j, k0 + p)
                                                  : s.value(k0 + p, n0 + j);
                  ASSERT_EQ(bits(got), bits(want))
                      << dtype_name(dtype) << " " << layout_name(layout) << " transposed "
                      << transposed << " nr " << nr << " cols " << cols << " (" << j << "," << p
                      << ")";
                }
              }
              ASSERT_EQ(dst.back(), kSentinel);
            }
          }
        }
      }
    }
  });
}

// bf16 pairs: element (i, k) of a panel of `width` at
// dst[panel * width * pairs * 2 + ((k / 2) * width + i % width) * 2 + k % 2].
TEST(PackContract, Bf16PairsAlongRowsAndDownColumns) {
  const Source s = make_source(DType::kBF16, Layout::kNone, 70, 60, 6);
  const uint16_t* src = reinterpret_cast<const uint16_t*>(s.bytes.data());
  auto raw = [&](int64_t r, int64_t c) { return src[r * s.ld + c]; };
  for (int width : {4, 12, 32}) {
    for (int64_t count : {int64_t{1}, int64_t{width}, int64_t{width + 5}}) {
      for (int64_t kc : {1, 2, 7, 30}) {
        const int64_t pairs = pairs_of(kc), panels = (count + width - 1) / width;
        auto at = [&](const std::vector<uint16_t>& dst, int64_t i, int64_t k) {
          return dst[static_cast<size_t>((i / width) * width * pairs * 2 +
                                         ((k / 2) * width + i % width) * 2 + k % 2)];
        };
        // Along rows: (i, k) = src[(r0 + i) * ld + k0 + k].
        {
          const int64_t r0 = 2, k0 = 3;
          std::vector<uint16_t> dst(static_cast<size_t>(bf16_packed_size(count, kc, width) + 1), 0xBEEF);
          pack_pairs_along_rows(src, s.ld, r0, count, k0, kc, width, dst.data());
          for (int64_t i = 0; i < panels * width; ++i) {
            for (int64_t k = 0; k < 2 * pairs; ++k) {
              const uint16_t want = i < count && k < kc ? raw(r0 + i, k0 + k) : 0;
              ASSERT_EQ(at(dst, i, k), want) << "rows: width " << width << " count " << count
                                             << " kc " << kc << " (" << i << "," << k << ")";
            }
          }
          ASSERT_EQ(dst.back(), 0xBEEF);
        }
        // Down columns: (j, k) = src[(k0 + k) * ld + c0 + j], rows at or past k_end zero.
        for (int64_t k_end : {int64_t{1000}, int64_t{8}}) {
          const int64_t k0 = 4, c0 = 5;
          if (c0 + count > s.cols) continue;
          std::vector<uint16_t> dst(static_cast<size_t>(bf16_packed_size(count, kc, width) + 1), 0xBEEF);
          pack_pairs_down_columns(src, s.ld, k0, kc, k_end, c0, count, width, dst.data());
          for (int64_t j = 0; j < panels * width; ++j) {
            for (int64_t k = 0; k < 2 * pairs; ++k) {
              const uint16_t want =
                  j < count && k < kc && k0 + k < k_end ? raw(k0 + k, c0 + j) : 0;
              ASSERT_EQ(at(dst, j, k), want) << "columns: width " << width << " count " << count
                                             << " kc " << kc << " k_end " << k_end << " (" << j
                                             << "," << k << ")";
            }
          }
          ASSERT_EQ(dst.back(), 0xBEEF);
        }
      }
    }
  }
}

// Pairs along rows packed deeper than the block (the AMX kernel's B panels,
// K padded to a multiple of 32): the pairs past kc are zero.
TEST(PackContract, Bf16PairsAlongRowsPaddedDeeper) {
  const Source s = make_source(DType::kBF16, Layout::kNone, 70, 60, 7);
  const uint16_t* src = reinterpret_cast<const uint16_t*>(s.bytes.data());
  for (int width : {4, 32}) {
    for (int64_t count : {int64_t{3}, int64_t{width + 5}}) {
      for (int64_t kc : {1, 7, 30}) {
        const int64_t padded = 32, pairs = padded / 2, panels = (count + width - 1) / width;
        std::vector<uint16_t> dst(static_cast<size_t>(bf16_packed_size(count, padded, width) + 1),
                                  0xBEEF);
        pack_pairs_along_rows(src, s.ld, 2, count, 3, kc, width, dst.data(), padded);
        for (int64_t i = 0; i < panels * width; ++i) {
          for (int64_t k = 0; k < padded; ++k) {
            const uint16_t got = dst[static_cast<size_t>((i / width) * width * pairs * 2 +
                                                         ((k / 2) * width + i % width) * 2 + k % 2)];
            const uint16_t want = i < count && k < kc ? src[(2 + i) * s.ld + 3 + k] : 0;
            ASSERT_EQ(got, want) << "width " << width << " count " << count << " kc " << kc
                                 << " (" << i << "," << k << ")";
          }
        }
        ASSERT_EQ(dst.back(), 0xBEEF);
      }
    }
  }
}

// The AMX kernel's A panels (Bf16Layout::kTileBlocks): blocks of 32 k, each
// `width` rows of 32 consecutive k; along rows (gmm's lhs) and down columns
// (tgmm's lhs^T, a transpose, rows at or past k_end zero), zero past kc and
// past count, nothing written past the packed size.
TEST(PackContract, Bf16TileBlocksAlongRowsAndDownColumns) {
  const Source s = make_source(DType::kBF16, Layout::kNone, 120, 80, 8);
  const uint16_t* src = reinterpret_cast<const uint16_t*>(s.bytes.data());
  constexpr int64_t kB = kAmxBlockK;
  for (int width : {16, 32}) {
    for (int64_t count : {int64_t{1}, int64_t{9}, int64_t{width}, int64_t{width + 13}}) {
      for (int64_t kc : {1, 8, 31, 32, 45, 64, 70}) {
        const int64_t blocks = (kc + kB - 1) / kB, panels = (count + width - 1) / width;
        const size_t size = static_cast<size_t>(bf16_packed_size(count, blocks * kB, width));
        auto at = [&](const std::vector<uint16_t>& dst, int64_t i, int64_t k) {
          return dst[static_cast<size_t>(((i / width) * blocks + k / kB) * width * kB +
                                         (i % width) * kB + k % kB)];
        };
        {
          const int64_t r0 = 3, k0 = 5;
          std::vector<uint16_t> dst(size + 1, 0xBEEF);
          pack_blocks_along_rows(src, s.ld, r0, count, k0, std::min<int64_t>(kc, s.cols - k0),
                                 width, dst.data());
          const int64_t depth = std::min<int64_t>(kc, s.cols - k0);
          for (int64_t i = 0; i < panels * width; ++i) {
            for (int64_t k = 0; k < blocks * kB; ++k) {
              const uint16_t want = i < count && k < depth ? src[(r0 + i) * s.ld + k0 + k] : 0;
              ASSERT_EQ(at(dst, i, k), want) << "rows: width " << width << " count " << count
                                             << " kc " << kc << " (" << i << "," << k << ")";
            }
          }
          ASSERT_EQ(dst.back(), 0xBEEF);
        }
        for (int64_t k_end : {int64_t{1000}, int64_t{40}}) {
          const int64_t k0 = 6, c0 = 7;
          if (c0 + count > s.cols) continue;
          std::vector<uint16_t> dst(size + 1, 0xBEEF);
          pack_blocks_down_columns(src, s.ld, k0, kc, k_end, c0, count, width, dst.data());
          for (int64_t i = 0; i < panels * width; ++i) {
            for (int64_t k = 0; k < blocks * kB; ++k) {
              const uint16_t want =
                  i < count && k < kc && k0 + k < k_end ? src[(k0 + k) * s.ld + c0 + i] : 0;
              ASSERT_EQ(at(dst, i, k), want) << "columns: width " << width << " count " << count
                                             << " kc " << kc << " k_end " << k_end << " (" << i
                                             << "," << k << ")";
            }
          }
          ASSERT_EQ(dst.back(), 0xBEEF);
        }
      }
    }
  }
}

}  // namespace
}  // namespace raggemm::kernels

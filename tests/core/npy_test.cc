// .npy reading and writing: round trips for every dtype and ranks 0..4,
// byte-for-byte agreement with files NumPy wrote (tests/core/data), the
// accepted header variants, and every rejection path with the argument and
// value it must name.
#include "raggemm/npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "raggemm/error.h"

namespace raggemm {
namespace {

using Bytes = std::vector<uint8_t>;

const std::string kDataDir = std::string(RAGGEMM_SOURCE_DIR) + "/tests/core/data/";

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

Bytes to_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

// An image with the given header dict (padded the NumPy way) and payload.
Bytes make_image(const std::string& dict, const Bytes& payload, uint8_t major = 1) {
  size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  size_t unpadded = preamble + header.size() + 1;
  header.append(64 - unpadded % 64, ' ');
  header += '\n';
  std::string text = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (size_t i = 0; i < preamble - 8; ++i) text += static_cast<char>(header.size() >> (8 * i));
  Bytes out = to_bytes(text + header);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::string dict_for(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

Tensor parse(const Bytes& bytes) { return parse_npy(bytes.data(), bytes.size(), "--lhs"); }

Bytes payload_of(const Tensor& tensor) {
  const uint8_t* data = tensor.as<uint8_t>();
  return Bytes(data, data + tensor.nbytes());
}

// ---- round trips ----------------------------------------------------------

TEST(NpyRoundTripTest, EveryDtypeAndRankZeroToFour) {
  const DType dtypes[] = {DType::kF32, DType::kF16, DType::kI32,
                          DType::kI64, DType::kI8,  DType::kU8};
  const Shape shapes[] = {{},        {7},       {0},          {3, 5},      {2, 0},
                          {2, 3, 4}, {1, 1, 1}, {2, 1, 3, 2}, {3, 0, 2, 1}};
  std::mt19937 random(7);
  for (DType dtype : dtypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + shape_string(shape));
      Tensor original(dtype, shape);
      uint8_t* bytes = original.as<uint8_t>();
      for (size_t i = 0; i < original.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(random());
      Bytes image = serialize_npy(original);
      // Version 1.0, header padded so the payload starts 64-byte aligned.
      ASSERT_GE(image.size(), 64u);
      EXPECT_EQ(image[6], 1);
      EXPECT_EQ(image[7], 0);
      size_t header_end = 10 + (image[8] | (image[9] << 8));
      EXPECT_EQ(header_end % 64, 0u);
      EXPECT_EQ(image[header_end - 1], '\n');
      EXPECT_EQ(image.size(), header_end + original.nbytes());

      Tensor parsed = parse(image);
      EXPECT_EQ(parsed.dtype(), dtype);
      EXPECT_EQ(parsed.shape(), shape);
      EXPECT_EQ(payload_of(parsed), payload_of(original));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(parsed.data()) % 64, 0u);
    }
  }
}

TEST(NpyRoundTripTest, Bf16IsWrittenAsF32AndFp8AsU8) {
  Tensor bf16(DType::kBF16, {4});
  const uint16_t bits[] = {0x3f80, 0xc0a0, 0x7f80, 0x0001};  // 1, -5, inf, tiny subnormal
  std::memcpy(bf16.data(), bits, sizeof(bits));
  Tensor widened = parse(serialize_npy(bf16));
  ASSERT_EQ(widened.dtype(), DType::kF32);
  ASSERT_EQ(widened.shape(), Shape{4});
  for (int i = 0; i < 4; ++i) {
    float expected = bf16_to_f32(bits[i]);
    EXPECT_EQ(std::memcmp(&widened.as<float>()[i], &expected, sizeof(float)), 0) << i;
  }

  for (DType fp8 : {DType::kF8E4M3, DType::kF8E5M2}) {
    Tensor raw(fp8, {2, 2});
    const uint8_t values[] = {0x00, 0x7f, 0x80, 0xff};
    std::memcpy(raw.data(), values, sizeof(values));
    Tensor read = parse(serialize_npy(raw));
    EXPECT_EQ(read.dtype(), DType::kU8);
    EXPECT_EQ(read.shape(), (Shape{2, 2}));
    EXPECT_EQ(payload_of(read), Bytes(values, values + 4));
  }
}

TEST(NpyRoundTripTest, FileRoundTrip) {
  std::string path = testing::TempDir() + "raggemm_npy_file_round_trip.npy";
  Tensor original(DType::kI64, {3, 2});
  for (int i = 0; i < 6; ++i) original.as<int64_t>()[i] = (int64_t{1} << 40) * (i - 3);
  write_npy(path, original);
  Tensor read = read_npy(path, "--group-sizes");
  EXPECT_EQ(read.dtype(), DType::kI64);
  EXPECT_EQ(read.shape(), (Shape{3, 2}));
  EXPECT_EQ(payload_of(read), payload_of(original));
  std::remove(path.c_str());
}

// ---- agreement with NumPy ---------------------------------------------------

template <class T>
std::vector<T> values_of(const Tensor& tensor) {
  return std::vector<T>(tensor.as<T>(), tensor.as<T>() + tensor.numel());
}

TEST(NpyNumpyTest, ReadsNumpyFilesAndWritesIdenticalBytes) {
  struct Case {
    const char* file;
    DType dtype;
    Shape shape;
    bool byte_identical;  // version 1.0 files: our writer must reproduce them
  };
  const Case cases[] = {
      {"numpy_f32_2x3.npy", DType::kF32, {2, 3}, true},
      {"numpy_f16_5.npy", DType::kF16, {5}, true},
      {"numpy_i32_scalar.npy", DType::kI32, {}, true},
      {"numpy_i64_1x1x2.npy", DType::kI64, {1, 1, 2}, true},
      {"numpy_i8_0x5.npy", DType::kI8, {0, 5}, true},
      {"numpy_u8_2x1x1x2.npy", DType::kU8, {2, 1, 1, 2}, true},
      {"numpy_u8_aligned.npy",
       DType::kU8,
       {10, 10, 10, 10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
       true},
      {"numpy_v2_f32_3.npy", DType::kF32, {3}, false},
      {"numpy_v3_i32_2x2.npy", DType::kI32, {2, 2}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    Bytes golden = read_bytes(kDataDir + c.file);
    Tensor tensor = read_npy(kDataDir + c.file, "--lhs");
    EXPECT_EQ(tensor.dtype(), c.dtype);
    EXPECT_EQ(tensor.shape(), c.shape);
    if (c.byte_identical) {
      EXPECT_EQ(serialize_npy(tensor), golden);
    }
  }
  // Values, to be sure the payload offset is right.
  EXPECT_EQ(values_of<float>(read_npy(kDataDir + "numpy_f32_2x3.npy", "x")),
            (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(values_of<uint16_t>(read_npy(kDataDir + "numpy_f16_5.npy", "x")),
            (std::vector<uint16_t>{0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00}));
  EXPECT_EQ(values_of<int32_t>(read_npy(kDataDir + "numpy_i32_scalar.npy", "x")),
            std::vector<int32_t>{-7});
  EXPECT_EQ(values_of<int64_t>(read_npy(kDataDir + "numpy_i64_1x1x2.npy", "x")),
            (std::vector<int64_t>{int64_t{1} << 40, -3}));
  EXPECT_EQ(values_of<float>(read_npy(kDataDir + "numpy_v2_f32_3.npy", "x")),
            (std::vector<float>{1.5f, -0.0f, 3.25f}));
  EXPECT_EQ(values_of<int32_t>(read_npy(kDataDir + "numpy_v3_i32_2x2.npy", "x")),
            (std::vector<int32_t>{1, 2, 3, 4}));
  Tensor aligned = read_npy(kDataDir + "numpy_u8_aligned.npy", "x");
  for (int64_t i = 0; i < aligned.numel(); ++i) ASSERT_EQ(aligned.as<uint8_t>()[i], i % 256);
}

TEST(NpyNumpyTest, RejectsNumpyFilesWeDoNotSupport) {
  struct Case {
    const char* file;
    const char* value;
  };
  const Case cases[] = {
      {"numpy_fortran_f32_2x3.npy", "fortran_order=True"},
      {"numpy_big_endian_f4.npy", "descr='>f4'"},
      {"numpy_f64_2.npy", "descr='<f8'"},
      {"numpy_bool_2.npy", "descr='|b1'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    try {
      read_npy(kDataDir + c.file, "--rhs");
      FAIL() << "expected an Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "--rhs");
      EXPECT_EQ(error.value(), c.value);
      EXPECT_NE(std::string(error.what()).find(c.file), std::string::npos)
          << "the message names the file: " << error.what();
    }
  }
}

// ---- header variants the parser accepts ---------------------------------------

TEST(NpyHeaderTest, AcceptsLegalVariants) {
  const Bytes four = {1, 0, 0, 0};
  struct Case {
    std::string dict;
    Shape shape;
    uint8_t major;
  };
  const Case cases[] = {
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", {1}, 1},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,)}", {1}, 1},
      {"{'shape': (1,), 'fortran_order': False, 'descr': '<i4'}", {1}, 1},
      {"{'fortran_order': False, 'descr': '<i4', 'shape': (1, 1,), }", {1, 1}, 1},
      {"{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (1,)}", {1}, 1},
      {"  {  'descr' :'<i4','fortran_order':False,'shape':(  1 , )  ,  }", {1}, 1},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", {1}, 2},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", {1}, 3},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2), }", {2, 2}, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dict);
    Tensor tensor = parse(make_image(c.dict, four, c.major));
    EXPECT_EQ(tensor.shape(), c.shape);
  }
  // No padding and no newline at all is still a valid header.
  std::string dict = dict_for("|u1", "(3,)");
  std::string unpadded_text =
      std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict + "abc";
  Bytes unpadded = to_bytes(unpadded_text);
  EXPECT_EQ(parse(unpadded).shape(), Shape{3});
}

// ---- rejections -------------------------------------------------------------

struct BadImage {
  const char* name;
  Bytes image;
  std::string value;  // the Error's value(); empty: only check the argument
};

std::vector<BadImage> bad_images() {
  auto image = [&](const std::string& dict, const Bytes& payload = Bytes(8, 0)) {
    return make_image(dict, payload);
  };
  Bytes valid = image(dict_for("<f4", "(2,)"));
  Bytes bad_version = valid;
  bad_version[6] = 4;
  Bytes bad_minor = valid;
  bad_minor[7] = 1;
  Bytes long_header = valid;
  long_header[8] = 0xff;
  long_header[9] = 0xff;
  Bytes huge_v2_header = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0xff, '{'};
  std::string many_dims = "(";
  for (int i = 0; i < 65; ++i) many_dims += "1,";
  many_dims += ")";
  return {
      {"empty", {}, "magic=''"},
      {"magic only", {0x93, 'N', 'U', 'M', 'P', 'Y'}, ""},
      {"bad magic", to_bytes("PK\x03\x04 this is a zip file"), "magic='PK\\x03\\x04 t'"},
      {"wrong case magic", to_bytes("\x93numpy\x01\x00\x00\x00"), ""},
      {"version 4.0", bad_version, "version=4.0"},
      {"version 1.1", bad_minor, "version=1.1"},
      {"v2 preamble cut", {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0x10, 0}, "size=10"},
      {"header length past the end", long_header, "header_len=65535"},
      {"v2 4 GiB header length", huge_v2_header, "header_len=4294967295"},
      {"fortran order", image("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }"),
       "fortran_order=True"},
      {"big-endian f4", image(dict_for(">f4", "(2,)")), "descr='>f4'"},
      {"native-order f4", image(dict_for("=f4", "(2,)")), "descr='=f4'"},
      {"f64", image(dict_for("<f8", "(1,)")), "descr='<f8'"},
      {"bool", image(dict_for("|b1", "(8,)")), "descr='|b1'"},
      {"u1 with '<'", image(dict_for("<u1", "(8,)")), "descr='<u1'"},
      {"unsigned 32", image(dict_for("<u4", "(2,)")), "descr='<u4'"},
      {"empty descr", image(dict_for("", "(2,)")), "descr=''"},
      {"structured descr",
       image("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"), ""},
      {"missing shape", image("{'descr': '<f4', 'fortran_order': False}"), ""},
      {"missing descr", image("{'fortran_order': False, 'shape': (2,)}"), ""},
      {"missing fortran_order", image("{'descr': '<f4', 'shape': (2,)}"), ""},
      {"duplicate key",
       image("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"),
       "key='descr'"},
      {"extra key", image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
       "key='x'"},
      {"not a dict", image("['descr', '<f4']"), ""},
      {"unterminated dict", image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)"), ""},
      {"unterminated string", image("{'descr: '<f4'"), ""},
      {"garbage after dict", image(dict_for("<f4", "(2,)") + " x"), ""},
      {"two commas", image("{'descr': '<f4',, 'fortran_order': False, 'shape': (2,)}"), ""},
      {"fortran_order 0", image("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}"), ""},
      {"shape is an int", image(dict_for("<f4", "(2)")), ""},
      {"shape is a list", image(dict_for("<f4", "[2]")), ""},
      {"negative dim", image(dict_for("<f4", "(-2,)")), ""},
      {"dim with sign", image(dict_for("<f4", "(+2,)")), ""},
      {"dim overflows int64", image(dict_for("<f4", "(9223372036854775808,)")), ""},
      {"shape product overflows", image(dict_for("<f4", "(4294967296, 4294967296)")),
       "shape=[4294967296,4294967296]"},
      {"zero dim does not excuse overflow", image(dict_for("<f4", "(0, 4294967296, 4294967296)")),
       "shape=[0,4294967296,4294967296]"},
      {"too many dims", image(dict_for("<f4", many_dims)), "shape rank>64"},
      {"payload too short", image(dict_for("<f4", "(3,)")), "shape=[3]"},
      {"payload too long", image(dict_for("<f4", "(1,)")), "shape=[1]"},
      {"huge shape tiny payload", image(dict_for("<i8", "(2305843009213693951,)")),
       "shape=[2305843009213693951]"},
      {"wrapping byte count", image(dict_for("<i8", "(2305843009213693953,)")),
       "shape=[2305843009213693953]"},
      {"non-ascii header", image("{'descr': '<f4\xc3\xa9', 'fortran_order': False, 'shape': (2,)}"),
       "descr='<f4\\xc3\\xa9'"},
      {"NUL in header", image(std::string("{'descr': '<f4'\0", 16)), ""},
  };
}

TEST(NpyErrorTest, RejectsMalformedImagesNamingArgumentAndValue) {
  for (const BadImage& bad : bad_images()) {
    SCOPED_TRACE(bad.name);
    try {
      parse(bad.image);
      FAIL() << "expected an Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "--lhs") << error.what();
      if (!bad.value.empty()) {
        EXPECT_EQ(error.value(), bad.value) << error.what();
      }
    }
  }
}

TEST(NpyErrorTest, EveryTruncationOfAValidFileIsRejected) {
  Tensor tensor(DType::kI32, {3, 2});
  for (int i = 0; i < 6; ++i) tensor.as<int32_t>()[i] = i;
  Bytes image = serialize_npy(tensor);
  for (size_t length = 0; length < image.size(); ++length) {
    // A fresh buffer of exactly `length` bytes, so ASan sees any over-read.
    Bytes prefix(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(length));
    prefix.shrink_to_fit();
    EXPECT_THROW(parse(prefix), Error) << "length " << length;
  }
  EXPECT_NO_THROW(parse(image));
}

TEST(NpyErrorTest, NullDataIsAnErrorNotACrash) {
  EXPECT_THROW(parse_npy(nullptr, 0, "--lhs"), Error);
  EXPECT_THROW(parse_npy(nullptr, 100, "--lhs"), Error);
}

TEST(NpyErrorTest, ReadNpyNamesArgumentAndPath) {
  std::string missing = testing::TempDir() + "raggemm_no_such_file.npy";
  try {
    read_npy(missing, "--lhs");
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), "--lhs");
    EXPECT_EQ(error.value(), missing);
  }
  try {
    read_npy(testing::TempDir(), "--rhs");
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), "--rhs");
    EXPECT_EQ(error.value(), testing::TempDir());
  }
}

TEST(NpyWriteTest, RejectsNonContiguousAndNullViews) {
  float storage[6] = {};
  TensorView strided(DType::kF32, Shape{3, 2}, storage);
  strided.shape = {2, 3};
  strided.strides = {1, 2};  // a transposed view
  EXPECT_THROW(serialize_npy(strided), Error);
  try {
    write_npy(testing::TempDir() + "raggemm_never_written.npy", strided);
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), "view");
    EXPECT_NE(error.value().find("strides=[1,2]"), std::string::npos) << error.value();
  }
  EXPECT_FALSE(std::ifstream(testing::TempDir() + "raggemm_never_written.npy").good());

  TensorView null_view(DType::kF32, Shape{2}, static_cast<void*>(nullptr));
  EXPECT_THROW(serialize_npy(null_view), Error);
  TensorView empty_null(DType::kF32, Shape{0, 4}, static_cast<void*>(nullptr));
  EXPECT_EQ(parse(serialize_npy(empty_null)).shape(), (Shape{0, 4}));
}

}  // namespace
}  // namespace raggemm

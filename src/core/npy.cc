// NumPy .npy reading and writing. The parser treats every image as hostile:
// each read is bounds-checked against the buffer, the header dict is parsed by
// a small strict grammar (no eval, no recursion), and the tensor is allocated
// only after the payload actually present has been checked to be exactly
// numel * itemsize bytes.
#include "raggemm/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string_view>

#include "core/dtype_traits.h"
#include "raggemm/error.h"
#include "raggemm/temp_files.h"

namespace raggemm {
namespace {

constexpr uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kMagicSize = sizeof(kMagic);
// NumPy's own limit on array rank (NPY_MAXDIMS in NumPy 2); it also bounds the
// memory a hostile shape tuple can make us allocate.
constexpr size_t kMaxRank = 64;
constexpr size_t kHeaderAlignment = 64;

struct DescrEntry {
  const char* descr;
  DType dtype;
};

// The only dtypes we read. Big-endian ('>'), native ('='), bool and every
// other NumPy type are rejected by name.
constexpr DescrEntry kDescrs[] = {
    {"<f4", DType::kF32}, {"<f2", DType::kF16}, {"<i4", DType::kI32},
    {"<i8", DType::kI64}, {"|i1", DType::kI8},  {"|u1", DType::kU8},
};

// Reports problems with the image as Error(argument, "<what>", message),
// adding where the image came from (a path) when there is one.
class ImageErrors {
 public:
  ImageErrors(const std::string& argument, const std::string& source)
      : argument_(argument), source_(source) {}

  [[noreturn]] void fail(const std::string& value, const std::string& message) const {
    raggemm::fail(argument_, value, source_.empty() ? message : message + " in " + source_);
  }

 private:
  const std::string& argument_;
  const std::string& source_;
};

// Shows a header fragment in an error without dumping binary noise.
std::string printable(std::string_view text, size_t limit = 40) {
  std::string out;
  for (char c : text.substr(0, limit)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  if (text.size() > limit) out += "...";
  return out;
}

// A strict parser of the header dict NumPy writes, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Keys may come in any order, single or double quotes, optional trailing
// commas, spaces anywhere between tokens. Anything else is an error.
class HeaderParser {
 public:
  struct Header {
    std::string descr;
    bool fortran_order = false;
    Shape shape;
  };

  HeaderParser(std::string_view text, const ImageErrors& errors) : text_(text), errors_(errors) {}

  Header parse() {
    Header header;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    skip_spaces();
    expect('{');
    skip_spaces();
    while (!at('}')) {
      std::string key = parse_string("header key");
      skip_spaces();
      expect(':');
      skip_spaces();
      if (key == "descr") {
        check_unique(seen_descr, key);
        header.descr = parse_string("descr");
      } else if (key == "fortran_order") {
        check_unique(seen_fortran, key);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        check_unique(seen_shape, key);
        header.shape = parse_shape();
      } else {
        errors_.fail("key='" + printable(key) + "'",
                     "unexpected key in .npy header (expected descr, fortran_order, shape)");
      }
      skip_spaces();
      if (at(',')) {
        ++pos_;
        skip_spaces();
      } else if (!at('}')) {
        fail_here("expected ',' or '}' in .npy header dict");
      }
    }
    ++pos_;  // '}'
    // NumPy pads with spaces and ends with '\n'; nothing else may follow.
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
    if (pos_ != text_.size()) fail_here("trailing bytes after the .npy header dict");
    if (!seen_descr) errors_.fail("header={" + printable(text_) + "}", "missing key 'descr'");
    if (!seen_fortran) {
      errors_.fail("header={" + printable(text_) + "}", "missing key 'fortran_order'");
    }
    if (!seen_shape) errors_.fail("header={" + printable(text_) + "}", "missing key 'shape'");
    return header;
  }

 private:
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }

  [[noreturn]] void fail_here(const std::string& message) const {
    std::string_view rest = pos_ < text_.size() ? text_.substr(pos_) : std::string_view("<end>");
    errors_.fail("header at byte " + std::to_string(pos_) + "='" + printable(rest) + "'", message);
  }

  void expect(char c) {
    if (!at(c)) fail_here(std::string("expected '") + c + "' in .npy header");
    ++pos_;
  }

  void check_unique(bool& seen, const std::string& key) const {
    if (seen) errors_.fail("key='" + key + "'", "duplicate key in .npy header");
    seen = true;
  }

  std::string parse_string(const char* what) {
    if (!at('\'') && !at('"')) fail_here(std::string("expected a quoted string for ") + what);
    char quote = text_[pos_++];
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      // Escapes never occur in the keys and dtypes we accept; refusing them
      // keeps the grammar trivial.
      if (text_[pos_] == '\\' || text_[pos_] == '\n') {
        fail_here(std::string("unsupported character in ") + what);
      }
      ++pos_;
    }
    if (pos_ >= text_.size()) fail_here(std::string("unterminated string for ") + what);
    std::string out(text_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }

  bool parse_bool() {
    std::string_view rest = text_.substr(pos_);
    if (rest.starts_with("True")) {
      pos_ += 4;
      return true;
    }
    if (rest.starts_with("False")) {
      pos_ += 5;
      return false;
    }
    fail_here("fortran_order must be True or False");
  }

  int64_t parse_dim() {
    size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      int digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        errors_.fail("shape dim='" + printable(text_.substr(start), 30) + "'",
                     "shape dim overflows int64");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail_here("expected a non-negative integer in shape");
    return value;
  }

  // A Python tuple of non-negative ints: (), (3,), (3, 4) or (3, 4,).
  Shape parse_shape() {
    Shape shape;
    expect('(');
    skip_spaces();
    bool trailing_comma = false;
    while (!at(')')) {
      if (shape.size() == kMaxRank) {
        errors_.fail("shape rank>" + std::to_string(kMaxRank), "too many dims in .npy shape");
      }
      shape.push_back(parse_dim());
      skip_spaces();
      trailing_comma = false;
      if (at(',')) {
        ++pos_;
        trailing_comma = true;
        skip_spaces();
      } else if (!at(')')) {
        fail_here("expected ',' or ')' in shape");
      }
    }
    // "(3)" is the int 3 in Python, not a tuple.
    if (shape.size() == 1 && !trailing_comma) fail_here("a one-dim shape needs a trailing comma");
    ++pos_;
    return shape;
  }

  std::string_view text_;
  const ImageErrors& errors_;
  size_t pos_ = 0;
};

uint32_t read_le(const uint8_t* bytes, size_t count) {
  uint32_t value = 0;
  for (size_t i = 0; i < count; ++i) value |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  return value;
}

DType dtype_of_descr(const std::string& descr, const ImageErrors& errors) {
  for (const DescrEntry& entry : kDescrs) {
    if (descr == entry.descr) return entry.dtype;
  }
  errors.fail("descr='" + printable(descr) + "'",
              "unsupported .npy dtype (expected little-endian <f4, <f2, <i4, <i8, |i1 or |u1)");
}

Tensor parse_image(const uint8_t* data, size_t size, const std::string& argument,
                   const std::string& source) {
  ImageErrors errors(argument, source);
  if (data == nullptr && size != 0) errors.fail("data=null", "no .npy image");
  if (size < kMagicSize + 2 || std::memcmp(data, kMagic, kMagicSize) != 0) {
    std::string_view start(reinterpret_cast<const char*>(data), std::min(size, kMagicSize));
    errors.fail("magic='" + printable(start) + "'",
                "not a .npy file (bad magic string or shorter than its preamble)");
  }
  uint8_t major = data[kMagicSize];
  uint8_t minor = data[kMagicSize + 1];
  // 1.0: 2-byte header length; 2.0 and 3.0 (UTF-8 header): 4-byte length.
  size_t length_bytes = major == 1 ? 2 : 4;
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    errors.fail("version=" + std::to_string(major) + "." + std::to_string(minor),
                "unsupported .npy format version (expected 1.0, 2.0 or 3.0)");
  }
  size_t preamble = kMagicSize + 2 + length_bytes;
  if (size < preamble) errors.fail("size=" + std::to_string(size), "truncated .npy preamble");
  size_t header_length = read_le(data + kMagicSize + 2, length_bytes);
  if (header_length > size - preamble) {
    errors.fail("header_len=" + std::to_string(header_length), "truncated .npy header (file has " +
                                                                   std::to_string(size - preamble) +
                                                                   " bytes after the preamble)");
  }
  std::string_view header_text(reinterpret_cast<const char*>(data + preamble), header_length);
  HeaderParser::Header header = HeaderParser(header_text, errors).parse();

  DType dtype = dtype_of_descr(header.descr, errors);
  if (header.fortran_order) {
    errors.fail("fortran_order=True", "Fortran-order .npy files are not supported (C order only)");
  }
  // The product of the non-zero dims must fit, so that the element count
  // and every row-major stride do, even for shapes with a zero dim.
  int64_t product = 1;
  bool has_zero_dim = false;
  for (int64_t dim : header.shape) {
    if (dim == 0) {
      has_zero_dim = true;
      continue;
    }
    if (product > std::numeric_limits<int64_t>::max() / dim) {
      errors.fail("shape=" + shape_string(header.shape), "shape product overflows int64");
    }
    product *= dim;
  }
  int64_t numel = has_zero_dim ? 0 : product;
  size_t payload = size - preamble - header_length;
  size_t itemsize = dtype_size(dtype);
  // Compare without multiplying so a huge shape cannot wrap around.
  bool exact = static_cast<uint64_t>(numel) <= payload / itemsize &&
               static_cast<size_t>(numel) * itemsize == payload;
  if (!exact) {
    errors.fail("shape=" + shape_string(header.shape),
                "data size mismatch: " + std::to_string(payload) + " payload bytes for " +
                    std::to_string(numel) + " elements of " + std::to_string(itemsize) +
                    " bytes (truncated or trailing data)");
  }
  Tensor tensor(dtype, header.shape);
  if (payload) std::memcpy(tensor.data(), data + preamble + header_length, payload);
  return tensor;
}

// bf16 is widened to f32 (NumPy has no bf16), fp8 written as raw bits.
const char* descr_for_write(DType dtype) { return core::dtype_traits(dtype).npy_descr; }

std::string header_dict(const char* descr, const Shape& shape) {
  std::string text = "{'descr': '";
  text += descr;
  text += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  text += "), }";
  return text;
}

std::string errno_text(int error) { return std::strerror(error); }

void unlink_quietly(const std::string& path) { ::unlink(path.c_str()); }

std::string temp_path_for(const std::string& path) { return atomic_temp_path(path); }

std::string parent_directory(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Tensor parse_npy(const uint8_t* data, size_t size, const std::string& argument) {
  return parse_image(data, size, argument, "");
}

Tensor read_npy(const std::string& path, const std::string& argument) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(argument, path, "cannot open .npy file: " + errno_text(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) fail(argument, path, "cannot stat: " + errno_text(errno));
  if (S_ISDIR(info.st_mode)) fail(argument, path, "is a directory, not a .npy file");
  std::vector<uint8_t> bytes;
  if (S_ISREG(info.st_mode)) bytes.reserve(static_cast<size_t>(info.st_size));
  // Read to EOF rather than trusting st_size, so pipes work and a file that
  // shrinks underneath us is seen as truncated, not as garbage.
  uint8_t chunk[1 << 16];
  while (true) {
    ssize_t got = ::read(fd, chunk, sizeof(chunk));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(argument, path, "cannot read: " + errno_text(errno));
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  return parse_image(bytes.data(), bytes.size(), argument, path);
}

std::vector<uint8_t> serialize_npy(const TensorView& view) {
  require(view.is_contiguous(), "view",
          "shape=" + shape_string(view.shape) + " strides=" + shape_string(view.strides),
          "only contiguous views can be written to .npy");
  int64_t numel = checked_numel(view.shape, "view");
  require(numel == 0 || view.data != nullptr, "view", "data=null",
          "a non-empty view needs data to write");
  const char* descr = descr_for_write(view.dtype);
  size_t itemsize = view.dtype == DType::kBF16 ? 4 : dtype_size(view.dtype);
  require(static_cast<uint64_t>(numel) <= std::numeric_limits<size_t>::max() / 8, "view",
          "shape=" + shape_string(view.shape), "too large to serialize");
  size_t payload = static_cast<size_t>(numel) * itemsize;

  std::string dict = header_dict(descr, view.shape);
  // Pads exactly as NumPy does (always 1..64 spaces), so our files are
  // byte-identical to np.save's.
  auto padded_size = [&](size_t preamble_size) {
    size_t unpadded = preamble_size + dict.size() + 1;  // + '\n'
    return unpadded + kHeaderAlignment - unpadded % kHeaderAlignment;
  };
  // Version 1.0 unless the header outgrows its 2-byte length field.
  constexpr size_t kV1Preamble = kMagicSize + 2 + 2;
  bool v1 = padded_size(kV1Preamble) - kV1Preamble <= 0xffff;
  size_t preamble = v1 ? kV1Preamble : kMagicSize + 2 + 4;
  size_t unpadded = preamble + dict.size() + 1;
  size_t total_header = padded_size(preamble);
  dict.append(total_header - unpadded, ' ');
  dict += '\n';
  size_t header_length = total_header - preamble;

  std::vector<uint8_t> out(total_header + payload);
  uint8_t* cursor = out.data();
  std::memcpy(cursor, kMagic, kMagicSize);
  cursor[kMagicSize] = v1 ? 1 : 2;
  cursor[kMagicSize + 1] = 0;
  for (size_t i = 0; i < preamble - kMagicSize - 2; ++i) {
    cursor[kMagicSize + 2 + i] = static_cast<uint8_t>((header_length >> (8 * i)) & 0xff);
  }
  std::memcpy(cursor + preamble, dict.data(), dict.size());
  cursor += total_header;
  if (view.dtype == DType::kBF16) {
    const uint16_t* source = view.as<const uint16_t>();
    for (int64_t i = 0; i < numel; ++i, cursor += sizeof(float)) {
      float widened = bf16_to_f32(source[i]);
      std::memcpy(cursor, &widened, sizeof(widened));
    }
  } else if (payload) {
    std::memcpy(cursor, view.data, payload);
  }
  return out;
}

void write_npy(const std::string& path, const TensorView& view, const std::string& argument) {
  std::vector<uint8_t> bytes = serialize_npy(view);
  write_file_atomic(path, bytes.data(), bytes.size(), argument);
}

namespace {

// A file written in full to its temporary beside `path` and fsynced, not yet
// renamed into place.
struct StagedFile {
  std::string path, temp, argument;
};

StagedFile stage_file(const std::string& path, const void* data, size_t size,
                      const std::string& argument) {
  require(!path.empty(), argument, "''", "output path is empty");
  require(size == 0 || data != nullptr, argument, path, "no data to write");
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    temp = temp_path_for(path);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) fail(argument, path, "cannot create temporary file: " + errno_text(errno));

  // From here on, any failure removes the temporary file before throwing.
  auto abandon = [&](const std::string& what, int error) {
    if (fd >= 0) ::close(fd);
    unlink_quietly(temp);
    fail(argument, path, what + ": " + errno_text(error));
  };
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  size_t written = 0;
  while (written < size) {
    ssize_t done = ::write(fd, bytes + written, size - written);
    if (done >= 0) {
      written += static_cast<size_t>(done);
    } else if (errno != EINTR) {
      abandon("cannot write", errno);
    }
  }
  if (::fsync(fd) != 0) abandon("cannot fsync", errno);
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon("cannot close", errno);
  return StagedFile{path, temp, argument};
}

void commit_staged(const StagedFile& staged) {
  if (::rename(staged.temp.c_str(), staged.path.c_str()) != 0) {
    const int error = errno;
    unlink_quietly(staged.temp);
    fail(staged.argument, staged.path, "cannot rename into place: " + errno_text(error));
  }
  // Make the rename itself durable; a failure here cannot tear the file, so
  // it is not an error.
  int dir = ::open(parent_directory(staged.path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const void* data, size_t size,
                       const std::string& argument) {
  commit_staged(stage_file(path, data, size, argument));
}

void write_npys_together(const std::vector<NpyOutput>& outputs) {
  std::vector<StagedFile> staged;
  try {
    for (const NpyOutput& output : outputs) {
      const std::vector<uint8_t> bytes = serialize_npy(output.view);
      staged.push_back(stage_file(output.path, bytes.data(), bytes.size(), output.argument));
    }
  } catch (...) {
    for (const StagedFile& file : staged) unlink_quietly(file.temp);
    throw;
  }
  for (size_t i = 0; i < staged.size(); ++i) {
    try {
      commit_staged(staged[i]);
    } catch (...) {
      for (size_t j = i + 1; j < staged.size(); ++j) unlink_quietly(staged[j].temp);
      throw;
    }
  }
}

}  // namespace raggemm

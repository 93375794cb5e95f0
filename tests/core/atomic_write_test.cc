// write_file_atomic, write_npy and write_npys_together: the file appears
// whole or not at all, no temporary file survives success or failure, and a
// failed write never clobbers what was there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/npy.h"

namespace raggemm {
namespace {

namespace fs = std::filesystem;

class AtomicWriteTest : public testing::Test {
 protected:
  void SetUp() override {
    const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("raggemm_atomic_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

  static std::string contents(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  static void put(const fs::path& path, const std::string& text) {
    write_file_atomic(path.string(), text.data(), text.size());
  }

  // Writing to `target` must throw an Error naming "path" and the target.
  static void expect_put_fails(const fs::path& target) {
    try {
      put(target, "data");
      FAIL() << "expected an Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "path");
      EXPECT_EQ(error.value(), target.string());
    }
  }

  fs::path dir_;
};

TEST_F(AtomicWriteTest, WritesBytesAndLeavesNoTempFile) {
  put(dir_ / "out.bin", "hello");
  EXPECT_EQ(contents(dir_ / "out.bin"), "hello");
  EXPECT_EQ(entries(), std::set<std::string>{"out.bin"});
}

TEST_F(AtomicWriteTest, ReplacesAnExistingFile) {
  put(dir_ / "out.bin", "a much longer first version");
  put(dir_ / "out.bin", "short");
  EXPECT_EQ(contents(dir_ / "out.bin"), "short");
  EXPECT_EQ(entries(), std::set<std::string>{"out.bin"});
}

TEST_F(AtomicWriteTest, WritesAnEmptyFile) {
  write_file_atomic((dir_ / "empty").string(), nullptr, 0);
  EXPECT_TRUE(fs::exists(dir_ / "empty"));
  EXPECT_EQ(fs::file_size(dir_ / "empty"), 0u);
}

TEST_F(AtomicWriteTest, MissingDirectoryNamesThePathAndCreatesNothing) {
  fs::path target = dir_ / "no_such_dir" / "out.npy";
  expect_put_fails(target);
  EXPECT_TRUE(entries().empty());
}

TEST_F(AtomicWriteTest, FailedRenameRemovesTempAndKeepsTarget) {
  // A non-empty directory where the file should go: the temp file is written
  // and fsynced, then rename fails; the temp must go, the directory stay.
  fs::path target = dir_ / "out.npy";
  fs::create_directories(target);
  put(target / "keep.txt", "precious");
  expect_put_fails(target);
  EXPECT_EQ(entries(), std::set<std::string>{"out.npy"});
  EXPECT_EQ(contents(target / "keep.txt"), "precious");
}

TEST_F(AtomicWriteTest, EmptyPathIsAnError) { EXPECT_THROW(write_file_atomic("", "x", 1), Error); }

TEST_F(AtomicWriteTest, FailedWriteNpyDoesNotClobber) {
  fs::path target = dir_ / "out.npy";
  put(target, "previous contents");
  float storage[4] = {1, 2, 3, 4};
  TensorView transposed(DType::kF32, Shape{2, 2}, storage);
  transposed.strides = {1, 2};
  EXPECT_THROW(write_npy(target.string(), transposed), Error);
  EXPECT_EQ(contents(target), "previous contents");
  EXPECT_EQ(entries(), std::set<std::string>{"out.npy"});
}

TEST_F(AtomicWriteTest, WriteNpyIntoMissingDirectoryNamesArgumentAndPath) {
  Tensor tensor(DType::kF32, {2});
  fs::path target = dir_ / "missing" / "o.npy";
  struct Case {
    bool pass_argument;
    const char* expected_argument;
  };
  for (const Case& c : {Case{false, "path"}, Case{true, "--out"}}) {
    SCOPED_TRACE(c.expected_argument);
    try {
      if (c.pass_argument) {
        write_npy(target.string(), tensor, "--out");
      } else {
        write_npy(target.string(), tensor);
      }
      FAIL() << "expected an Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), c.expected_argument);
      EXPECT_EQ(error.value(), target.string());
    }
  }
  EXPECT_TRUE(entries().empty());
}

TEST_F(AtomicWriteTest, FailedRenameNamesTheCallersArgument) {
  fs::create_directories(dir_ / "taken" / "child");
  try {
    write_file_atomic((dir_ / "taken").string(), "x", 1, "--cache");
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), "--cache");
  }
  EXPECT_EQ(entries(), std::set<std::string>{"taken"});
}

// write_npys_together: a set of files is staged whole before any is renamed,
// so when one cannot be written the others keep what they held.
TEST_F(AtomicWriteTest, TogetherWritesAllOrLeavesEveryPathAsItWas) {
  Tensor codes(DType::kF32, {3}), scales(DType::kF32, {1});
  write_npys_together({{(dir_ / "codes.npy").string(), codes, "--out"},
                       {(dir_ / "scales.npy").string(), scales, "--scales"}});
  EXPECT_EQ(entries(), (std::set<std::string>{"codes.npy", "scales.npy"}));
  const std::string old_codes = contents(dir_ / "codes.npy");

  // The second file cannot be created: the first keeps its old contents and
  // no temporary file is left.
  Tensor new_codes(DType::kF32, {5});
  const fs::path unwritable = dir_ / "missing" / "scales.npy";
  try {
    write_npys_together({{(dir_ / "codes.npy").string(), new_codes, "--out"},
                         {unwritable.string(), scales, "--scales"}});
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), "--scales");
    EXPECT_EQ(error.value(), unwritable.string());
  }
  EXPECT_EQ(contents(dir_ / "codes.npy"), old_codes);
  EXPECT_EQ(entries(), (std::set<std::string>{"codes.npy", "scales.npy"}));
}

TEST_F(AtomicWriteTest, ConcurrentWritersNeverTearTheFile) {
  // Each writer's payload is one repeated letter: a torn or interleaved file
  // would mix letters or have the wrong length.
  constexpr int kWriters = 4, kRounds = 10;
  constexpr size_t kSize = 1 << 16;
  fs::path target = dir_ / "shared.bin";
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::string payload(kSize, static_cast<char>('a' + w));
      for (int round = 0; round < kRounds; ++round) put(target, payload);
    });
  }
  for (std::thread& writer : writers) writer.join();
  std::string result = contents(target);
  ASSERT_EQ(result.size(), kSize);
  EXPECT_EQ(result.find_first_not_of(result[0]), std::string::npos);
  EXPECT_EQ(entries(), std::set<std::string>{"shared.bin"});
}

}  // namespace
}  // namespace raggemm

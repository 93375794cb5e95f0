// Synthetic Markov-chain and byte-level text datasets.
#include "train/data.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "raggemm/error.h"

namespace raggemm::train {
namespace {

// splitmix64: a tiny, portable generator; every stream is keyed by its use.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t x = (state += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

uint64_t stream_key(uint64_t seed, uint64_t purpose, uint64_t index) {
  Rng rng(seed * 0x100000001B3ull ^ purpose);
  rng.state ^= index * 0xD1B54A32D192ED03ull;
  return rng.next();
}

// The global index of sequence b of `step` for this shard.
uint64_t sequence_index(const DataShard& shard, int64_t batch, int64_t step, int64_t b) {
  const int64_t global_batch = shard.global_batch > 0 ? shard.global_batch : batch;
  return static_cast<uint64_t>(step * global_batch + shard.first + b);
}

double entropy(const std::vector<double>& p) {
  double h = 0;
  for (double x : p) {
    if (x > 0) h -= x * std::log(x);
  }
  return h;
}

class MarkovDataset : public Dataset {
 public:
  MarkovDataset(int64_t vocab, int64_t branching, int64_t batch, int64_t length, uint64_t seed,
                DataShard shard)
      : vocab_(vocab),
        branching_(branching),
        batch_(batch),
        length_(length),
        seed_(seed),
        shard_(shard) {
    Rng rng(stream_key(seed, 1, 0));
    successors_.resize(static_cast<size_t>(vocab * branching));
    cumulative_.resize(static_cast<size_t>(vocab * branching));
    std::vector<double> row_entropy(static_cast<size_t>(vocab));
    for (int64_t s = 0; s < vocab; ++s) {
      // Distinct successors; skewed weights make a low-entropy chain.
      std::vector<double> weights(static_cast<size_t>(branching));
      double total = 0;
      for (int64_t j = 0; j < branching; ++j) {
        int32_t next = 0;
        bool fresh = false;
        while (!fresh) {
          next = static_cast<int32_t>(rng.below(vocab));
          fresh = true;
          for (int64_t i = 0; i < j; ++i) fresh &= successors_[s * branching + i] != next;
        }
        successors_[s * branching + j] = next;
        weights[j] = -std::log(rng.uniform());  // exponential: Dirichlet(1) after normalising
        total += weights[j];
      }
      double running = 0;
      for (int64_t j = 0; j < branching; ++j) {
        weights[j] /= total;
        running += weights[j];
        cumulative_[s * branching + j] = running;
      }
      cumulative_[s * branching + branching - 1] = 1.0;
      row_entropy[s] = entropy(weights);
    }
    // Exact floor: sequences start uniformly; average the next-token entropy
    // over the `length` predicted positions with the state distribution
    // propagated through the chain.
    std::vector<double> dist(static_cast<size_t>(vocab), 1.0 / static_cast<double>(vocab));
    double sum = 0;
    for (int64_t pos = 0; pos < length; ++pos) {
      std::vector<double> next(static_cast<size_t>(vocab), 0.0);
      for (int64_t s = 0; s < vocab; ++s) {
        sum += dist[s] * row_entropy[s];
        double previous = 0;
        for (int64_t j = 0; j < branching; ++j) {
          const double p = cumulative_[s * branching + j] - previous;
          previous = cumulative_[s * branching + j];
          next[successors_[s * branching + j]] += dist[s] * p;
        }
      }
      dist = std::move(next);
    }
    floor_ = sum / static_cast<double>(length);
  }

  Batch batch(int64_t step) const override {
    Batch out;
    const size_t count = static_cast<size_t>(batch_ * length_);
    out.inputs.resize(count);
    out.targets.resize(count);
    for (int64_t b = 0; b < batch_; ++b) {
      Rng rng(stream_key(seed_, 2, sequence_index(shard_, batch_, step, b)));
      int32_t state = static_cast<int32_t>(rng.below(vocab_));
      for (int64_t pos = 0; pos < length_; ++pos) {
        const double u = rng.uniform();
        int64_t j = 0;
        while (j + 1 < branching_ && cumulative_[state * branching_ + j] < u) ++j;
        const int32_t next = successors_[state * branching_ + j];
        out.inputs[b * length_ + pos] = state;
        out.targets[b * length_ + pos] = next;
        state = next;
      }
    }
    return out;
  }

  double loss_floor() const override { return floor_; }
  std::string describe() const override {
    std::ostringstream out;
    out << "synthetic Markov chain: vocab " << vocab_ << ", " << branching_
        << " successors per state, seed " << seed_;
    return out.str();
  }

 private:
  int64_t vocab_, branching_, batch_, length_;
  uint64_t seed_;
  DataShard shard_;
  std::vector<int32_t> successors_;
  std::vector<double> cumulative_;
  double floor_ = 0;
};

class TextDataset : public Dataset {
 public:
  TextDataset(const std::string& path, int64_t batch, int64_t length, uint64_t seed,
              DataShard shard)
      : path_(path), batch_(batch), length_(length), seed_(seed), shard_(shard) {
    std::error_code error;
    require(!std::filesystem::is_directory(path, error), "dataset_path", path,
            "is a directory, not a text file");
    std::ifstream in(path, std::ios::binary);
    require(in.good(), "dataset_path", path, "cannot open the text file");
    try {
      bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (const std::exception& e) {
      fail("dataset_path", path, std::string("cannot read the text file: ") + e.what());
    }
    require(
        static_cast<int64_t>(bytes_.size()) > length, "dataset_path", path,
        "file holds " + std::to_string(bytes_.size()) + " bytes, fewer than max_target_length + 1");
    // Empirical H(next byte | byte).
    std::vector<double> pair(256 * 256, 0.0), single(256, 0.0);
    for (size_t i = 0; i + 1 < bytes_.size(); ++i) {
      pair[static_cast<unsigned char>(bytes_[i]) * 256 +
           static_cast<unsigned char>(bytes_[i + 1])] += 1;
      single[static_cast<unsigned char>(bytes_[i])] += 1;
    }
    const double total = static_cast<double>(bytes_.size() - 1);
    double h = 0;
    for (int a = 0; a < 256; ++a) {
      for (int b = 0; b < 256; ++b) {
        const double n = pair[a * 256 + b];
        if (n > 0) h -= n / total * std::log(n / single[a]);
      }
    }
    floor_ = h;
  }

  Batch batch(int64_t step) const override {
    Batch out;
    out.inputs.resize(static_cast<size_t>(batch_ * length_));
    out.targets.resize(out.inputs.size());
    const int64_t windows = static_cast<int64_t>(bytes_.size()) - length_;
    for (int64_t b = 0; b < batch_; ++b) {
      Rng rng(stream_key(seed_, 3, sequence_index(shard_, batch_, step, b)));
      const int64_t start = rng.below(windows);
      for (int64_t pos = 0; pos < length_; ++pos) {
        out.inputs[b * length_ + pos] = static_cast<unsigned char>(bytes_[start + pos]);
        out.targets[b * length_ + pos] = static_cast<unsigned char>(bytes_[start + pos + 1]);
      }
    }
    return out;
  }

  double loss_floor() const override { return floor_; }
  std::string describe() const override {
    return "text file " + path_ + " (" + std::to_string(bytes_.size()) +
           " bytes); floor = empirical bigram entropy";
  }

 private:
  std::string path_;
  int64_t batch_, length_;
  uint64_t seed_;
  DataShard shard_;
  std::string bytes_;
  double floor_ = 0;
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic_dataset(int64_t vocab, int64_t branching, int64_t batch,
                                                int64_t length, uint64_t seed, DataShard shard) {
  return std::make_unique<MarkovDataset>(vocab, branching, batch, length, seed, shard);
}

std::unique_ptr<Dataset> make_text_dataset(const std::string& path, int64_t batch, int64_t length,
                                           uint64_t seed, DataShard shard) {
  return std::make_unique<TextDataset>(path, batch, length, seed, shard);
}

}  // namespace raggemm::train

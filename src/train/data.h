// Training data: batches of token sequences, each a pure function of
// (seed, step) so that a resumed run reads exactly what it would have read.
//   synthetic: a fixed random Markov chain over the vocabulary, each state
//              with a few likely successors; its exact loss floor (the
//              average conditional entropy of the next token) is known.
//   text:      a local file as bytes (vocab 256), random windows; the floor
//              printed is the file's empirical bigram conditional entropy,
//              the best this bigram-like model family can do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace raggemm::train {

struct Batch {
  std::vector<int32_t> inputs;   // [batch * length]
  std::vector<int32_t> targets;  // [batch * length]: the next token
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual Batch batch(int64_t step) const = 0;
  virtual double loss_floor() const = 0;
  virtual std::string describe() const = 0;
};

// Which sequences of the global stream a process reads: sequence b of step
// s is global sequence s * global_batch + first + b. One process reads the
// whole batch (first 0, global_batch = batch); under expert parallelism
// rank r reads first = r * batch of global_batch = P * batch, so P ranks
// together see exactly what one process with batch P * B would.
struct DataShard {
  int64_t first = 0;
  int64_t global_batch = 0;  // 0: the dataset's own batch
};

std::unique_ptr<Dataset> make_synthetic_dataset(int64_t vocab, int64_t branching, int64_t batch,
                                                int64_t length, uint64_t seed,
                                                DataShard shard = {});
std::unique_ptr<Dataset> make_text_dataset(const std::string& path, int64_t batch, int64_t length,
                                           uint64_t seed, DataShard shard = {});

}  // namespace raggemm::train

// SGD / AdamW with optional bf16 weights over f32 masters.
#include "train/optimizer.h"

#include <cmath>

#include "core/float_bits.h"
#include "raggemm/dtype.h"

namespace raggemm::train {

bool Optimizer::bf16_weight(const moe::Param<float>& param) {
  return param.trainable && param.shape.size() >= 2;
}

Optimizer::Optimizer(const TrainConfig& config, std::vector<moe::Param<float>*> params)
    : config_(config), bf16_weights_(config.weight_dtype == DType::kBF16) {
  for (moe::Param<float>* param : params) {
    if (!param->trainable) continue;
    Slot slot{param, {}, {}, {}};
    if (bf16_weights_ && bf16_weight(*param)) {
      // The f32 values become the master; the param keeps only bf16 bits.
      // One param at a time, so the f32 copy is never doubled model-wide.
      if (param->bf16) {
        slot.master = param->values_f32();
      } else {
        slot.master = param->value;
        param->store_bf16();
      }
    }
    if (config.opt_type == "adamw") {
      slot.m.assign(static_cast<size_t>(param->size()), 0.0f);
      slot.v.assign(static_cast<size_t>(param->size()), 0.0f);
    }
    slots_.push_back(std::move(slot));
  }
}

void Optimizer::sync_weights() {
  for (Slot& slot : slots_) {
    if (!slot.master.empty()) slot.param->set_values(slot.master);
  }
}

double Optimizer::learning_rate(const TrainConfig& config, int64_t step) {
  const int64_t schedule =
      config.learning_rate_schedule_steps > 0 ? config.learning_rate_schedule_steps : config.steps;
  const double warmup = std::round(config.warmup_steps_fraction * static_cast<double>(schedule));
  const double s = static_cast<double>(step);
  if (s <= warmup) return config.learning_rate * s / warmup;
  const double span = std::max(1.0, static_cast<double>(schedule) - warmup);
  const double progress = std::min(1.0, (s - warmup) / span);
  const double f = config.cosine_learning_rate_final_fraction;
  return config.learning_rate * (f + (1 - f) * 0.5 * (1 + std::cos(M_PI * progress)));
}

void Optimizer::step(double lr) {
  ++updates_;
  const bool adam = config_.opt_type == "adamw";
  const double b1 = config_.adam_b1, b2 = config_.adam_b2;
  const float correction1 = static_cast<float>(1 - std::pow(b1, static_cast<double>(updates_)));
  const float correction2 = static_cast<float>(1 - std::pow(b2, static_cast<double>(updates_)));
  const float rate = static_cast<float>(lr);
  const float eps = static_cast<float>(config_.adam_eps);
  const float decay = static_cast<float>(config_.adam_weight_decay);
  for (Slot& slot : slots_) {
    const bool bf16 = !slot.master.empty();
    float* w = bf16 ? slot.master.data() : slot.param->value.data();
    // bf16 params: the rounded master is written beside the update, one
    // pass over memory (dummy target for f32 params, never read).
    uint16_t* bits = bf16 ? slot.param->bits.data() : nullptr;
    const float* g = slot.param->grad.data();
    const int64_t count = slot.param->size();
    auto store = [bits](int64_t i, float value) {
      if (bits) bits[i] = core::bf16_bits_of(value);
    };
    if (adam) {
      float* m = slot.m.data();
      float* v = slot.v.data();
      const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
#pragma omp parallel for schedule(static) if (count > 65536)
      for (int64_t i = 0; i < count; ++i) {
        m[i] = fb1 * m[i] + (1 - fb1) * g[i];
        v[i] = fb2 * v[i] + (1 - fb2) * g[i] * g[i];
        const float update = (m[i] / correction1) / (std::sqrt(v[i] / correction2) + eps);
        w[i] -= rate * (update + decay * w[i]);
        store(i, w[i]);
      }
    } else {
#pragma omp parallel for schedule(static) if (count > 65536)
      for (int64_t i = 0; i < count; ++i) {
        w[i] -= rate * g[i];
        store(i, w[i]);
      }
    }
  }
}

std::map<std::string, std::vector<float>*> Optimizer::state() {
  std::map<std::string, std::vector<float>*> out;
  for (Slot& slot : slots_) {
    if (!slot.master.empty()) out["master/" + slot.param->name] = &slot.master;
    if (!slot.m.empty()) out["adam_m/" + slot.param->name] = &slot.m;
    if (!slot.v.empty()) out["adam_v/" + slot.param->name] = &slot.v;
  }
  return out;
}

}  // namespace raggemm::train

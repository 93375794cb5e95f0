// SGD / AdamW with optional bf16 weights over f32 masters.
#include "train/optimizer.h"

#include <cmath>

#include "raggemm/dtype.h"

namespace raggemm::train {
namespace {

float round_to_bf16(float value) { return bf16_to_f32(f32_to_bf16(value)); }

}  // namespace

Optimizer::Optimizer(const TrainConfig& config, std::vector<moe::Param<float>*> params)
    : config_(config), bf16_weights_(config.weight_dtype == DType::kBF16) {
  for (moe::Param<float>* param : params) {
    if (!param->trainable) continue;
    Slot slot{param, {}, {}, {}};
    if (bf16_weights_) slot.master = param->value;
    if (config.opt_type == "adamw") {
      slot.m.assign(param->value.size(), 0.0f);
      slot.v.assign(param->value.size(), 0.0f);
    }
    slots_.push_back(std::move(slot));
  }
  sync_weights();
}

void Optimizer::sync_weights() {
  if (!bf16_weights_) return;
  for (Slot& slot : slots_) {
    for (size_t i = 0; i < slot.master.size(); ++i)
      slot.param->value[i] = round_to_bf16(slot.master[i]);
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
    float* w = bf16_weights_ ? slot.master.data() : slot.param->value.data();
    const float* g = slot.param->grad.data();
    const int64_t count = slot.param->size();
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
      }
    } else {
#pragma omp parallel for schedule(static) if (count > 65536)
      for (int64_t i = 0; i < count; ++i) w[i] -= rate * g[i];
    }
    if (bf16_weights_) {
      float* value = slot.param->value.data();
#pragma omp parallel for schedule(static) if (count > 65536)
      for (int64_t i = 0; i < count; ++i) value[i] = round_to_bf16(w[i]);
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

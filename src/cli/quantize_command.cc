// raggemm quantize: codes and scales of a float32 .npy (include/raggemm/quant.h).
//
//   raggemm quantize --in X.npy --out Q.npy --scales S.npy
//       --type fp8_e4m3|fp8_e5m2|int8 --granularity SPEC [--static-range R]
//
// fp8 codes are written as uint8 (the raw bit pattern), int8 codes as int8,
// scales as float32 with the input's rank. Every flag and the input are
// checked before anything is written; both files are written atomically.
#include <iostream>
#include <limits>
#include <optional>

#include "cli/command.h"
#include "cli/common.h"
#include "raggemm/error.h"
#include "raggemm/npy.h"
#include "raggemm/quant.h"

namespace raggemm::cli {
namespace {

int run_quantize(const std::vector<std::string>& args) {
  CLI::App app{
      "Quantize a float32 array: codes (fp8 as raw uint8 bits, or int8) and float32 "
      "scales, value = decode(code) * scale.",
      "raggemm quantize"};
  std::string in_path, out_path, scales_path, type_name, spec, static_range;
  app.add_option("--in", in_path, "input float32 .npy, any rank")->required();
  app.add_option("--out", out_path, "codes .npy (uint8 for fp8, int8 for int8)")->required();
  app.add_option("--scales", scales_path, "scales float32 .npy, the input's rank")->required();
  app.add_option("--type", type_name, "fp8_e4m3, fp8_e5m2 or int8")->required();
  app.add_option("--granularity", spec,
                 "per_tensor | channel:AXES[+block:AXIS:SIZE], e.g. channel:0 (per row), "
                 "channel:0,2+block:1:128")
      ->required();
  app.add_option("--static-range", static_range,
                 "calibrate to a fixed range R (scale = R / type max) instead of dynamic absmax");
  parse_command_line(app, args);

  const QuantType type = parse_quant_type(type_name, "--type");
  const Granularity granularity = parse_granularity(spec, "--granularity");
  std::optional<float> range;
  if (app.count("--static-range")) {
    range = static_cast<float>(parse_real(static_range, "--static-range",
                                          std::numeric_limits<float>::min(),
                                          std::numeric_limits<float>::max()));
  }
  check_output_path(out_path, "--out");
  check_output_path(scales_path, "--scales");
  require(out_path != scales_path, "--scales", scales_path, "is also the --out path");

  Tensor input = read_npy(in_path, "--in");
  require(input.dtype() == DType::kF32 || input.dtype() == DType::kF16, "--in", in_path,
          std::string("dtype ") + dtype_name(input.dtype()) + ", expected float32 or float16");
  granularity.scale_shape(input.shape(), "--granularity");  // axes fit the input's rank
  QuantizedTensor quantized;
  try {
    quantized = quantize(input, type, granularity, range);
  } catch (const Error& error) {
    if (error.argument() != "input") throw;
    fail("--in", in_path, error.what());
  }
  // Both or neither: the codes are useless without their scales.
  write_npys_together(
      {{out_path, quantized.values, "--out"}, {scales_path, quantized.scales, "--scales"}});
  std::cout << "wrote " << out_path << ": " << quant_type_name(type) << " codes "
            << shape_string(quantized.values.shape()) << "; " << scales_path << ": f32 "
            << shape_string(quantized.scales.shape()) << " (" << granularity.to_string() << ")\n";
  return 0;
}

const CommandRegistrar kQuantizeRegistrar("quantize",
                                          "quantize a float32 .npy to fp8/int8 codes and scales",
                                          run_quantize);

}  // namespace
}  // namespace raggemm::cli

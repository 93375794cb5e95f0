// raggemm dequantize: float32 values of codes and scales written by
// `raggemm quantize`.
//
//   raggemm dequantize --in Q.npy --scales S.npy --type fp8_e4m3|fp8_e5m2|int8
//       --out X.npy [--granularity SPEC]
//
// The granularity is read off the scale shape (each axis kept, 1, or tiled
// in blocks; the block size is the power of two in 32..512 that gives that
// many blocks). --granularity states it when a block size is not a power of
// two and several sizes fit.
#include <iostream>

#include "cli/command.h"
#include "cli/common.h"
#include "raggemm/error.h"
#include "raggemm/npy.h"
#include "raggemm/quant.h"

namespace raggemm::cli {
namespace {

int run_dequantize(const std::vector<std::string>& args) {
  CLI::App app{"Dequantize codes and scales to float32: value = decode(code) * scale.",
               "raggemm dequantize"};
  std::string in_path, scales_path, type_name, out_path, spec;
  app.add_option("--in", in_path, "codes .npy (uint8 raw bits for fp8, int8 for int8)")->required();
  app.add_option("--scales", scales_path, "scales float32 .npy, the codes' rank")->required();
  app.add_option("--type", type_name, "fp8_e4m3, fp8_e5m2 or int8")->required();
  app.add_option("--out", out_path, "output float32 .npy")->required();
  app.add_option("--granularity", spec,
                 "the SPEC used to quantize (default: inferred from the scale shape)");
  parse_command_line(app, args);

  const QuantType type = parse_quant_type(type_name, "--type");
  std::optional<Granularity> stated;
  if (app.count("--granularity")) stated = parse_granularity(spec, "--granularity");
  check_output_path(out_path, "--out");

  Tensor codes = read_npy(in_path, "--in");
  const DType expected = type == QuantType::kInt8 ? DType::kI8 : DType::kU8;
  require(codes.dtype() == expected, "--in", in_path,
          std::string("dtype ") + dtype_name(codes.dtype()) + ", expected " +
              (type == QuantType::kInt8 ? "int8" : "uint8 (raw fp8 bits)") + " for " +
              quant_type_name(type));
  Tensor scales = read_npy(scales_path, "--scales");
  require(scales.dtype() == DType::kF32, "--scales", scales_path,
          std::string("dtype ") + dtype_name(scales.dtype()) + ", expected float32");
  Granularity granularity =
      stated ? *stated : infer_granularity(codes.shape(), scales.shape(), "--scales");
  const Shape scale_shape = granularity.scale_shape(codes.shape(), "--granularity");
  require(scale_shape == scales.shape(), "--scales", scales_path,
          "shape " + shape_string(scales.shape()) + ", but " + granularity.to_string() +
              " of codes " + shape_string(codes.shape()) + " needs " + shape_string(scale_shape));
  Tensor out = dequantize(codes, scales, type, granularity);
  write_npy(out_path, out, "--out");
  std::cout << "wrote " << out_path << ": f32 " << shape_string(out.shape()) << " ("
            << granularity.to_string() << ")\n";
  return 0;
}

const CommandRegistrar kDequantizeRegistrar(
    "dequantize", "float32 values of fp8/int8 codes and scales",
    run_dequantize);

}  // namespace
}  // namespace raggemm::cli

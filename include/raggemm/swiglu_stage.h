// SwiGLU as a stage of a gmm (GmmOptions::swiglu_forward_stage and
// swiglu_backward_stage, include/raggemm/gmm.h): the elementwise activation
// of an MoE expert that keeps gate and up in two buffers, run by the kernel
// on each output tile as soon as the tile is stored, while it is still in
// cache and on the kernel's own threads, instead of as a separate pass over
// [M, F] buffers afterwards.
//
//   forward  (the call computes up = x @ w_up):
//     act[i,j] = gate[i,j] / (1 + exp(-gate[i,j])) * out[i,j]
//   backward (the call computes dact = dy @ w_down^T), with sig the sigmoid
//   of gate[i,j] and dact = out[i,j]:
//     dgate[i,j] = dact * up[i,j] * sig * (1 + gate[i,j] * (1 - sig))
//     dup[i,j]   = dact * (gate[i,j] * sig)
//
// evaluated as written, with std::exp's bits (glibc's expf): the same bits
// as the MoE layer's separate SwiGLU loops (moe/swiglu.h). Every tensor is
// f32 [M, N_out] (N_out the call's output columns), row-major contiguous;
// the stage's outputs are written on the rows the call's local groups cover
// and are zero on every other row, as the gmm output is.
#pragma once

#include "raggemm/tensor.h"

namespace raggemm {

struct SwigluForwardStage {
  TensorView gate;  // read
  TensorView act;   // written
};

struct SwigluBackwardStage {
  TensorView gate;   // read
  TensorView up;     // read
  TensorView dgate;  // written
  TensorView dup;    // written
};

}  // namespace raggemm

package dev.scorch.engine.gpu;

/**
 * What a block part needs while a forward pass runs: the device, the GEMM precision, and the pass's scratch arenas
 * (floats, ints), whose slices live until the layer or the pass gives them back.
 */
record GpuPass(Device dev, GemmPrecision precision, Arena floats, Arena ints) {}

package dev.scorch.engine.device;

/**
 * SwiGLU MLP (the dense layers, each routed expert, the shared experts) on a device: its weights and shape, built once
 * per layer and passed to {@link Device#mlp} whole.
 *
 * @param gateUpProj   gate_proj and up_proj stacked, [2 · intermediate, hidden]
 * @param downProj     [hidden, intermediate]
 * @param hidden       hidden_size
 * @param inter        intermediate size
 */
public record Mlp(Buf gateUpProj, Buf downProj, int hidden, int inter) {}

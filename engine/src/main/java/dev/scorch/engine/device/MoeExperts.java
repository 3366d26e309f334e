package dev.scorch.engine.device;

/**
 * A MoE layer's experts on a device, built once per layer ({@code Moe}) and passed to {@link Device#moeExperts} whole.
 * The arrays are the same, unchanged, on every call (a device may keep a table of them, {@link Device#gemmExperts}).
 *
 * @param shape  the MoE's shape
 * @param gateUp gateUp[e]: routed expert e's gate_proj and up_proj stacked, [2 · moe_intermediate_size, hidden]
 * @param down   down[e]: its down_proj, [hidden, moe_intermediate_size]
 * @param shared the shared experts as one MLP; null when n_shared_experts is 0
 */
public record MoeExperts(MoeShape shape, Buf[] gateUp, Buf[] down, Mlp shared) {}

package dev.scorch.udfs.model;

import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.tokenizer.Tokenizer;
import java.util.Optional;

/** What an executor keeps per checkpoint: the model, and the tokenizer its folder ships (if any). */
public record LoadedModel(DeepseekV3Model model, Optional<Tokenizer> tokenizer) {}

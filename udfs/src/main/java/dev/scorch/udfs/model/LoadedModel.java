package dev.scorch.udfs.model;

import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.tokenizer.Tokenizer;
import java.nio.file.Path;
import java.util.Optional;

/**
 * What an executor keeps per checkpoint: the model, the tokenizer its folder ships (if any), and the local folder
 * the verified files were materialised in (what a GPU copy of the model is loaded from).
 */
public record LoadedModel(DeepseekV3Model model, Optional<Tokenizer> tokenizer, Path folder) {}

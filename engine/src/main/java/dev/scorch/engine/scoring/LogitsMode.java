package dev.scorch.engine.scoring;

/** Which positions' full logits a score returns. */
public enum LogitsMode {
    NONE,
    LAST,
    ALL
}

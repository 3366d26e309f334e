package dev.scorch.engine.checkpoint;

import java.util.List;

/** The result of checking a checkpoint against its config: errors make it unusable; ignored and unexpected tensors are reported. */
public record ValidationReport(List<String> errors, List<String> ignored, List<String> unexpected) {
    public boolean valid() {
        return errors.isEmpty();
    }

    /** Throws a {@link CheckpointException} listing the first errors when the checkpoint is not valid. */
    public ValidationReport orThrow() {
        if (!valid()) {
            String head = String.join("\n  ", errors.subList(0, Math.min(10, errors.size())));
            throw new CheckpointException("checkpoint is not valid (" + errors.size() + " errors):\n  " + head);
        }
        return this;
    }
}

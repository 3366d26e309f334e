package dev.scorch.engine.checkpoint;

/** A job-level fault in a checkpoint: the message names the file and, where there is one, the tensor or field. */
public final class CheckpointException extends RuntimeException {
    public CheckpointException(String message) {
        super(message);
    }

    public CheckpointException(String message, Throwable cause) {
        super(message, cause);
    }
}

package dev.scorch.jobs.lmeval.task;

import java.util.Locale;

/** lm-eval's output types: what a task asks of the model. */
public enum OutputType {
    MULTIPLE_CHOICE,
    LOGLIKELIHOOD,
    LOGLIKELIHOOD_ROLLING,
    GENERATE_UNTIL;

    public String id() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** The type named in a task file; IllegalArgumentException naming it and the four known ones. */
    public static OutputType of(String id) {
        for (OutputType t : values()) {
            if (t.id().equals(id)) {
                return t;
            }
        }
        throw new IllegalArgumentException("output_type '" + id
                + "' is not one of multiple_choice, loglikelihood, loglikelihood_rolling, generate_until");
    }
}

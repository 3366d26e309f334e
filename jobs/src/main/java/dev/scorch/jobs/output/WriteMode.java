package dev.scorch.jobs.output;

/** What a job may do with an output that already exists: the --overwrite, --force-overwrite and --resume flags as one value. */
public enum WriteMode {
    /** Refuse an existing output. */
    NEW,
    /** Replace an existing Scorch output (marked, or holding only Spark's part files); refuse anything else. */
    OVERWRITE,
    /** Replace an existing output whatever it holds (--overwrite --force-overwrite). */
    OVERWRITE_ANY,
    /** Finish an interrupted run: keep what is written, add the rows still missing. */
    RESUME;

    /** The mode the flags ask for; contradictory flags fail naming them. */
    public static WriteMode of(boolean overwrite, boolean forceOverwrite, boolean resume) {
        if (overwrite && resume) {
            throw new IllegalArgumentException("--overwrite and --resume contradict each other: pick one");
        }
        if (forceOverwrite && !overwrite) {
            throw new IllegalArgumentException("--force-overwrite only goes with --overwrite");
        }
        return resume ? RESUME : forceOverwrite ? OVERWRITE_ANY : overwrite ? OVERWRITE : NEW;
    }

    public boolean overwrites() {
        return this == OVERWRITE || this == OVERWRITE_ANY;
    }
}

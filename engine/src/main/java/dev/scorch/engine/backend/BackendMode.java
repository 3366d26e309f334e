package dev.scorch.engine.backend;

import java.util.Locale;

/** Which backend a scoring task asks for: whatever the task was given ({@link #AUTO}), or one forced. */
public enum BackendMode {
    /** CUDA when the task holds a GPU address and CUDA loads in this JVM, else the CPU. */
    AUTO,
    /** The CPU engine, whatever the task holds. */
    CPU,
    /** The GPU engine; fails when CUDA cannot be used. */
    CUDA;

    /** The command-line spelling: auto, cpu, cuda. */
    public String flag() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** auto, cpu or cuda (any case). */
    public static BackendMode parse(String s) {
        for (BackendMode m : values()) {
            if (m.flag().equalsIgnoreCase(s == null ? "" : s.trim())) {
                return m;
            }
        }
        StringBuilder accepted = new StringBuilder();
        for (BackendMode m : values()) {
            accepted.append(accepted.length() == 0 ? "" : ", ").append(m.flag());
        }
        throw new IllegalArgumentException("backend '" + s + "': expected one of " + accepted);
    }
}

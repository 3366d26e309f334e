package dev.scorch.engine.runtime;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** This process's memory as the OS sees it (weights mapped from files count once they are touched). */
public final class ProcessMemory {
    private ProcessMemory() {}

    /** Peak resident set size (VmHWM of /proc/self/status, Linux), or -1 where it is not available. */
    public static long peakRssBytes() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return -1;
    }
}

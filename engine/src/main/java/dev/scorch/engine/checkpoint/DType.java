package dev.scorch.engine.checkpoint;

import java.util.Optional;

/** Safetensors element types Scorch reads, with their byte sizes and header names. */
public enum DType {
    F32("F32", 4),
    F16("F16", 2),
    BF16("BF16", 2),
    F8_E4M3("F8_E4M3", 1),
    I32("I32", 4),
    I64("I64", 8);

    private final String headerName;
    private final int bytes;

    DType(String headerName, int bytes) {
        this.headerName = headerName;
        this.bytes = bytes;
    }

    public String headerName() {
        return headerName;
    }

    public int bytes() {
        return bytes;
    }

    public boolean isFloating() {
        return this != I32 && this != I64;
    }

    public static Optional<DType> fromHeader(String name) {
        for (DType t : values()) {
            if (t.headerName.equals(name)) {
                return Optional.of(t);
            }
        }
        return Optional.empty();
    }
}

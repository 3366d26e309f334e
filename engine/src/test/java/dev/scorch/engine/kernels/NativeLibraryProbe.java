package dev.scorch.engine.kernels;

/**
 * A child JVM for {@link NativeLibraryFileTest}: loads the native library, prints what NativeCpu says, and halts as a
 * crashed JVM would end (no shutdown hooks, no delete-on-exit).
 */
public final class NativeLibraryProbe {
    private NativeLibraryProbe() {}

    public static void main(String[] args) {
        System.out.println("status=" + NativeCpu.status());
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}

package dev.scorch.engine.checkpoint;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.MappedByteBuffer;
import java.nio.ShortBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;

/**
 * A read-only memory map of a whole file of any size. A MappedByteBuffer holds at most 2 GiB, so the file
 * is mapped in chunks that overlap by {@code overlap} bytes: any range no longer than the overlap lies
 * whole inside one chunk and comes back as one little-endian slice. Nothing is copied onto the heap.
 *
 * <p>A file that shrinks while mapped (truncated, or rewritten in place, while a job runs) has no pages past its new
 * end: a read there faults. The JVM turns the fault of a Java read into an InternalError, which the bulk reads here,
 * and {@link #readFault} for readers elsewhere, turn into a {@link CheckpointException} naming the file.
 */
public final class MappedFile {
    public static final long DEFAULT_CHUNK = 1L << 30;
    public static final int DEFAULT_OVERLAP = 64 << 20;

    private final Path path;
    /** The file as mapped, kept open: its length is the mapped file's (fstat), even where the path now names another. */
    private final RandomAccessFile file;

    private final long size;
    private final long chunk;
    private final int overlap;
    private final MappedByteBuffer[] maps;
    // Per chunk, little-endian views from its first byte, for absolute bulk reads that allocate nothing.
    private final ShortBuffer[] shorts;
    private final IntBuffer[] ints;
    private final FloatBuffer[] floats;

    public static MappedFile map(Path path) {
        return map(path, DEFAULT_CHUNK, DEFAULT_OVERLAP);
    }

    /** Chunk and overlap are parameters so tests can exercise chunk borders on small files. */
    public static MappedFile map(Path path, long chunk, int overlap) {
        if (chunk <= 0 || overlap < 0 || chunk + overlap > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("chunk " + chunk + " + overlap " + overlap + " must fit one mapping");
        }
        RandomAccessFile file = null;
        try {
            file = new RandomAccessFile(path.toFile(), "r");
            FileChannel ch = file.getChannel();
            long size = ch.size();
            int n = (int) Math.max(1, (size + chunk - 1) / chunk);
            MappedByteBuffer[] maps = new MappedByteBuffer[n];
            for (int i = 0; i < n; i++) {
                long start = i * chunk;
                long len = Math.min(size - start, chunk + overlap);
                maps[i] = ch.map(FileChannel.MapMode.READ_ONLY, start, Math.max(0, len));
            }
            return new MappedFile(path, file, size, chunk, overlap, maps);
        } catch (IOException e) {
            closeQuietly(file);
            throw new CheckpointException(path + ": cannot map file: " + e.getMessage(), e);
        }
    }

    private static void closeQuietly(RandomAccessFile f) {
        try {
            if (f != null) {
                f.close();
            }
        } catch (IOException ignored) {
            // it was not usable anyway
        }
    }

    private MappedFile(Path path, RandomAccessFile file, long size, long chunk, int overlap, MappedByteBuffer[] maps) {
        this.path = path;
        this.file = file;
        this.size = size;
        this.chunk = chunk;
        this.overlap = overlap;
        this.maps = maps;
        shorts = new ShortBuffer[maps.length];
        ints = new IntBuffer[maps.length];
        floats = new FloatBuffer[maps.length];
        for (int i = 0; i < maps.length; i++) {
            shorts[i] = maps[i].duplicate().order(ByteOrder.LITTLE_ENDIAN).asShortBuffer();
            ints[i] = maps[i].duplicate().order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
            floats[i] = maps[i].duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        }
    }

    public Path path() {
        return path;
    }

    public long size() {
        return size;
    }

    /** Longest range that {@link #slice} always returns in one piece. */
    public int maxSlice() {
        return overlap;
    }

    /** A little-endian view of [offset, offset + length); length must not exceed {@link #maxSlice()} unless the range lies in one chunk. */
    public ByteBuffer slice(long offset, int length) {
        int i = chunkOf(offset, length);
        return maps[i].slice((int) (offset - i * chunk), length).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * Whether the mapped file is now shorter than it was when mapped, so that reads past its new end fault. One fstat of
     * the open file, allocating nothing: cheap enough before every forward pass. A file replaced by renaming another onto
     * its path has not shrunk: the mapping keeps the old one's pages.
     */
    public boolean shrunk() {
        return length() < size;
    }

    /** The mapped file's length now; -1 where it cannot be had. */
    private long length() {
        try {
            return file.length();
        } catch (IOException e) {
            return -1;
        }
    }

    /**
     * The error for a read of [offset, offset + length) of this mapping that faulted (what: the reader, for the message;
     * may be null), naming the file and its sizes then and now.
     */
    public CheckpointException readFault(long offset, long length, String what, Throwable cause) {
        return changedOnDisk(
                "cannot read bytes [" + offset + ", " + (offset + length) + ")"
                        + (what == null ? "" : " (" + what + ")") + " of the mapped file",
                cause);
    }

    /** The error for a fault of this mapping: what happened, then the file (named) and its sizes then and now. */
    public CheckpointException changedOnDisk(String what, Throwable cause) {
        long length = length();
        String now = length < 0 ? "of unknown length" : length + " bytes";
        return new CheckpointException(
                path + ": " + what + ": the file is now " + now + ", " + size + " when it was mapped; it"
                        + " changed on disk while in use (truncated or rewritten in place; replace a model's files by renaming new ones into"
                        + " place)",
                cause);
    }

    /** A Java read's fault: {@link #readFault} where the file has shrunk, else the InternalError as it came. */
    private CheckpointException javaReadFault(long offset, long length, InternalError fault) {
        if (!shrunk()) {
            throw fault;
        }
        return readFault(offset, length, null, fault);
    }

    /** Copies the n bytes at offset into dst[off .. off + n) (the range as {@link #slice} takes it), allocating nothing. */
    public void getBytes(long offset, byte[] dst, int off, int n) {
        int i = chunkOf(offset, n);
        try {
            maps[i].get((int) (offset - i * chunk), dst, off, n);
        } catch (InternalError e) {
            throw javaReadFault(offset, n, e);
        }
    }

    /**
     * Copies n little-endian 16-bit values from offset into dst[off .. off + n), allocating nothing; false (and nothing
     * read) when offset is odd, where the caller reads through {@link #slice}.
     */
    public boolean getShorts(long offset, short[] dst, int off, int n) {
        int i = chunkOf(offset, 2 * n);
        long rel = offset - i * chunk;
        if ((rel & 1) != 0) {
            return false;
        }
        try {
            shorts[i].get((int) (rel >> 1), dst, off, n);
        } catch (InternalError e) {
            throw javaReadFault(offset, 2L * n, e);
        }
        return true;
    }

    /** As {@link #getShorts} for n little-endian 32-bit ints into dst[0 .. n); false when offset is not a multiple of 4. */
    public boolean getInts(long offset, int[] dst, int n) {
        int i = chunkOf(offset, 4 * n);
        long rel = offset - i * chunk;
        if ((rel & 3) != 0) {
            return false;
        }
        try {
            ints[i].get((int) (rel >> 2), dst, 0, n);
        } catch (InternalError e) {
            throw javaReadFault(offset, 4L * n, e);
        }
        return true;
    }

    /** As {@link #getShorts} for n little-endian floats into dst[off ..]; false when offset is not a multiple of 4. */
    public boolean getFloats(long offset, float[] dst, int off, int n) {
        int i = chunkOf(offset, 4 * n);
        long rel = offset - i * chunk;
        if ((rel & 3) != 0) {
            return false;
        }
        try {
            floats[i].get((int) (rel >> 2), dst, off, n);
        } catch (InternalError e) {
            throw javaReadFault(offset, 4L * n, e);
        }
        return true;
    }

    /**
     * The mapping that holds bytes [offset, offset + length) whole, for native code that reads them in place; null where
     * the range crosses a mapping border (longer than the overlap). {@link #mappingStart} is where it starts in the file.
     */
    public MappedByteBuffer mapping(long offset, int length) {
        int i = chunkIndex(offset, length);
        return offset - i * chunk + length > maps[i].capacity() ? null : maps[i];
    }

    /** The file offset of the first byte of {@link #mapping}'s buffer for the same range. */
    public long mappingStart(long offset, int length) {
        return chunkIndex(offset, length) * chunk;
    }

    private int chunkIndex(long offset, int length) {
        if (offset < 0 || length < 0 || offset + length > size) {
            throw new IndexOutOfBoundsException(
                    path + ": range [" + offset + ", " + (offset + length) + ") outside file of " + size + " bytes");
        }
        return (int) Math.min(offset / chunk, maps.length - 1);
    }

    /** The chunk holding [offset, offset + length) whole, bound-checked. */
    private int chunkOf(long offset, int length) {
        int i = chunkIndex(offset, length);
        if (offset - i * chunk + length > maps[i].capacity()) {
            throw new IllegalArgumentException(path + ": range of " + length
                    + " bytes crosses a mapping border; read it in pieces of at most " + overlap);
        }
        return i;
    }
}

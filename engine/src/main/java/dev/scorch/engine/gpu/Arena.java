package dev.scorch.engine.gpu;

import java.util.ArrayList;
import java.util.List;

/**
 * Scratch memory for one forward pass: slices taken from one device allocation per kind and all given back at
 * once by {@link #reset}. When a pass needs more than the block holds, an extra block serves it and the next
 * reset replaces both with one block of the size that pass needed, so steady state allocates nothing.
 */
final class Arena implements AutoCloseable {
  private static final long ALIGN = 64; // elements: 256-byte aligned slices for the GEMMs

  private final Device dev;
  private final Buf.Kind kind;
  private final List<Buf> blocks = new ArrayList<>();
  private long used; // in the last block
  private long total; // taken since the last reset

  Arena(Device dev, Buf.Kind kind, long initial) {
    this.dev = dev;
    this.kind = kind;
    blocks.add(dev.alloc(kind, Math.max(ALIGN, initial)));
  }

  /** n elements, contents undefined. */
  Buf take(long n) {
    long size = (n + ALIGN - 1) / ALIGN * ALIGN;
    Buf last = blocks.get(blocks.size() - 1);
    if (used + size > last.length()) {
      last = dev.alloc(kind, Math.max(size, last.length()));
      blocks.add(last);
      used = 0;
    }
    Buf b = last.slice(used, n);
    used += size;
    total += size;
    return b;
  }

  /** n zeroed elements. */
  Buf zeros(long n) {
    Buf b = take(n);
    dev.zero(b);
    return b;
  }

  /** Gives every slice back; grows to one block when the last pass needed several. */
  void reset() {
    if (blocks.size() > 1) {
      for (Buf b : blocks) {
        dev.free(b);
      }
      blocks.clear();
      blocks.add(dev.alloc(kind, total));
    }
    used = 0;
    total = 0;
  }

  /** Bytes held. */
  long bytes() {
    long b = 0;
    for (Buf x : blocks) {
      b += x.bytes();
    }
    return b;
  }

  @Override
  public void close() {
    for (Buf b : blocks) {
      dev.free(b);
    }
    blocks.clear();
  }
}

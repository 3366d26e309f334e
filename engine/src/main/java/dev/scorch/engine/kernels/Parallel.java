package dev.scorch.engine.kernels;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntConsumer;

/**
 * A fixed pool of engine threads. Work items are independent and each is computed the same way whichever
 * thread runs it, so results never depend on the thread count.
 */
public final class Parallel implements AutoCloseable {
  private final int threads;
  private final ExecutorService pool;

  public Parallel(int threads) {
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be >= 1, got " + threads);
    }
    this.threads = threads;
    AtomicInteger n = new AtomicInteger();
    this.pool = threads == 1 ? null : Executors.newFixedThreadPool(threads - 1, r -> {
      Thread t = new Thread(r, "scorch-engine-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
  }

  public int threads() {
    return threads;
  }

  /** Runs body(i) for i in [0, n), items handed out dynamically; the caller's thread works too. */
  public void forEach(int n, IntConsumer body) {
    if (threads == 1 || n <= 1) {
      for (int i = 0; i < n; i++) {
        body.accept(i);
      }
      return;
    }
    AtomicInteger next = new AtomicInteger();
    Runnable worker = () -> {
      for (int i = next.getAndIncrement(); i < n; i = next.getAndIncrement()) {
        body.accept(i);
      }
    };
    int helpers = Math.min(threads - 1, n - 1);
    List<Future<?>> fs = new ArrayList<>(helpers);
    for (int t = 0; t < helpers; t++) {
      fs.add(pool.submit(worker));
    }
    Throwable failure = null;
    try {
      worker.run();
    } catch (Throwable t) {
      failure = t;
    }
    for (Future<?> f : fs) {
      try {
        f.get();
      } catch (ExecutionException e) {
        failure = failure == null ? e.getCause() : failure;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        failure = failure == null ? e : failure;
      }
    }
    if (failure instanceof RuntimeException re) {
      throw re;
    } else if (failure instanceof Error err) {
      throw err;
    } else if (failure != null) {
      throw new RuntimeException(failure);
    }
  }

  @Override
  public void close() {
    if (pool != null) {
      pool.shutdownNow();
    }
  }
}
